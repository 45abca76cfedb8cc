"""Runs that are not comparable: the nodes slowed mid-sweep (thermal throttling, a degraded
GPU; a job runs at its slowest node, so one node's slowdown slows every job after it).

The search reads all its runs as one curve. Once the nodes slow, every run after reads
5-10 % lower: the drop reads as the curve falling past a peak, as a valley or as tile
alignment, and the verdict named a batch up to 6.7 % below the true best (red team, at
1-1.5 % run noise). No single run shows it; a value run again does. A later run of a value
reading lower than an earlier one by more than two runs' noise (FLAT, at the noise the
runs' steps show: two runs of one value at it differ by less) says the runs between are
not one curve (`slowdown`). The search then ends without a verdict (plan.py asks).

The check (the spec's `check_slowdown`, off by default: +0.x runs a sweep, see
docs/benchmarks.md): once the search has settled, the best runs again if it ran once and
a run made after it reads within SLOW_MAX of it (a slowdown that large could have hidden a
faster value there; a run farther below it, or none after it, changes nothing). Runs made
again for other reasons (the noise above NOISE, `measure_noise`) are checked alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.search.space import (
    Outcome,
    Probe,
    SearchSpace,
    Step,
    Value,
    mean_tgs,
    means,
)

SLOW_MAX = 0.10  # the largest slowdown looked for (a degraded GPU, thermal throttling)
# A drop is a slowdown beyond this many of two runs' noise (FLAT): the difference of two
# runs carries both runs' noise, sqrt(2) x one run's, so FLAT x sqrt(2) is two standard
# deviations of it. At FLAT alone, 5 % of the bench's sweeps where nothing slowed asked.
BAR = math.sqrt(2)


@dataclass(frozen=True)
class Slowdown:
    """`value` ran as probe `first` and again as probe `again`, reading `drop` (a share,
    negative) lower: the readings fell at a run after `first` and no later than `again`."""

    value: Value
    first: int
    again: int
    drop: float


def slow_bar(space: SearchSpace) -> float:
    """How far (a share) a value run again must read below an earlier run of it to say the
    nodes slowed: FLAT x sqrt(2), at the noise the runs' steps show (`BAR`)."""
    return space.flat * BAR


def slowdown(space: SearchSpace, probes: Sequence[Probe]) -> Slowdown | None:
    """The first value (in run order of its re-run) whose later run reads below an earlier
    run of it by more than `slow_bar`; None when every value run again agrees."""
    if not space.check_slowdown:
        return None
    seen: dict[Value, list[tuple[int, float]]] = {}
    for k, p in enumerate(probes):
        if p.earlier or p.outcome is not Outcome.OK or not p.tgs:
            continue
        for i, before in seen.get(p.value, []):
            if p.tgs / before - 1 < -slow_bar(space):
                return Slowdown(p.value, i, k, p.tgs / before - 1)
        seen.setdefault(p.value, []).append((k, p.tgs))
    return None


def check_run(space: SearchSpace, probes: Sequence[Probe]) -> Step | None:
    """The search has settled: the best runs again when a later run, read as much as
    SLOW_MAX low, could be faster than it (the verdict compares runs from before and after
    a possible slowdown); None when the check is off or nothing turns on it."""
    if not space.check_slowdown:
        return None
    own = [p for p in probes if not p.earlier]
    runs = means(own)
    if not runs:
        return None
    top = max(runs, key=lambda v: mean_tgs(runs[v]))
    if len(runs[top]) > 1:
        return None
    tries = [k for k, p in enumerate(own) if p.value == top]
    if len(tries) > 1:
        return None   # a failed run of it too: its runs are spent
    best = runs[top][0].tgs or 0.0
    later = [p for p in own[tries[0] + 1:] if p.outcome is Outcome.OK and p.tgs]
    close = [p for p in later if (p.tgs or 0.0) >= (1 - SLOW_MAX) * best]
    if not close:
        return None
    names = ", ".join(dict.fromkeys(str(p.value) for p in close))
    return Step(top, f"the best, {top}, ran before {names}, which read within "
                     f"{SLOW_MAX:.0%} of it: were the nodes to slow after it (a node "
                     "throttling, a degraded GPU), those later runs would read low and the "
                     f"verdict compare runs that are not comparable, so {top} runs again; "
                     "reading lower beyond the noise of two runs' difference "
                     f"({slow_bar(space):.1%}), the runs are not one curve (the spec's "
                     "check_slowdown)", repeat=True, rule="slowdown_check")
