"""What in a sweep's runs points at a node that slowed mid-sweep where nothing ran twice
(the default noise, SKILL.md's one run a value): the runs read against the concave curve
the search takes them for, in the order they ran.

A slowdown from run k on reads every later run 5-10 % low. A value run after one of its
neighbours (the nearest values run on either side) then reads below their chord; a concave
curve puts it on or above it. Beyond two runs' noise (FLAT) that is evidence (`suspect`):
red team s14, 22 run after 20 and 24 read 2.7 % under their chord, the node having slowed
between. It is not proof (a valley or tile alignment shows the same): it buys one run, the
best again (`slowed.check_run`), whose reading against its first settles it through the
drop and its confirmation (`slowed`). A run before both its neighbours is not read (a
slowdown after it lowers the chord, not the run), nor one before the best (the best run
again could not show a slowdown that came before it).

Not read (measured, too dear for what it catches): a run after the best reading level with
it. Level runs either side of the peak are what a concave curve gives as often as a
slowdown (red team s12: 30 after 24 read 0.7 % under it, its truth 5.6 % over it): on
the bench's tuned set it cost +0.44 runs a sweep where nothing slowed and, slowed from run
5, turned 19.3 % wrong into 17.3 % (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.model_perf.search.space import (
    Outcome,
    Probe,
    SearchSpace,
    Value,
    is_numeric,
)


def suspect(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """Why the runs point at a slowdown (said in the check run's reason), or None."""
    first = _first_runs(space, probes)
    if len(first) < 2:
        return None
    return _dip(space, first)


def _first_runs(space: SearchSpace, probes: Sequence[Probe]) -> dict[Value, tuple[int, float]]:
    """Each value's first passing run of this sweep: its order and reading."""
    out: dict[Value, tuple[int, float]] = {}
    for k, p in enumerate(probes):
        if not p.earlier and p.outcome is Outcome.OK and p.tgs and p.value not in out \
                and p.value in space.candidates:
            out[p.value] = (k, p.tgs)
    return out


def _dip(space: SearchSpace, first: dict[Value, tuple[int, float]]) -> str | None:
    if not space.ordered or not all(is_numeric(v) for v in first):
        return None
    order = sorted(first, key=lambda v: float(v))
    k_top = max(first.values(), key=lambda kt: kt[1])[0]
    for lo, mid, hi in zip(order, order[1:], order[2:], strict=False):
        (k_lo, t_lo), (k, t), (k_hi, t_hi) = first[lo], first[mid], first[hi]
        if k < k_lo and k < k_hi:
            continue   # run before both neighbours: a slowdown would lower the chord instead
        if k < k_top:
            continue   # run before the best: the best's run again could not show it
        share = (float(mid) - float(lo)) / (float(hi) - float(lo))
        chord = t_lo + share * (t_hi - t_lo)
        if t < (1 - space.flat) * chord:
            return (f"{mid}, run after its neighbour{'s' if k > max(k_lo, k_hi) else ''}, "
                    f"read {t / chord - 1:+.1%} against the chord of {lo} and {hi} (beyond "
                    f"two runs' noise, {space.flat:.1%}; a concave curve reads on or above it)")
    return None
