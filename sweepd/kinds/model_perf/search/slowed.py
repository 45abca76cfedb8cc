"""Runs that are not comparable: the nodes slowed mid-sweep (thermal throttling, a degraded
GPU; a job runs at its slowest node, so one node's slowdown slows every job after it).

The search reads all its runs as one curve. Once the nodes slow, every run after reads
5-10 % lower: the drop reads as the curve falling past a peak, as a valley or as tile
alignment, and the verdict named a batch up to 6.7 % below the true best (red team, at
1-1.5 % run noise). No single run shows it; a value run again does:

* A later run of a value reading below an earlier one beyond the noise of two runs'
  difference (`slow_bar`: FLAT x sqrt 2, at the noise the runs' steps show) is a drop.
  One drop is not enough (among a sweep's pairs one comes by chance: 3.7 % of the bench's
  sweeps at 1.3 % noise where nothing slowed): one more run confirms it (`confirm_run`:
  another value run before the drop, whose two runs then span it, reading lower beyond
  FLAT; else the value a third time). A confirmed drop (`slowdown`) ends the search
  without a verdict, naming the runs at one of which the readings fell; plan.py asks.
* Read by default where the noise is above NOISE: the best and its rivals run again there
  anyway (`repeat`), so it costs no run bar the confirmation (bench: +0.01 runs, 0.7 %
  false asks at 1.3 % noise). At the default noise nothing runs twice (SKILL.md's one
  run a value) unless the runs point at a slowdown (`suspect`: a run made after a
  neighbour reading below the chord of its neighbours, which a concave curve does not
  do): then the best runs again at once if it ran once and a run made after it reads
  within SLOW_MAX of it (`check_run`; once a sweep), and values run again are read
  (bench: +0.02 runs where nothing slowed). The spec's `check_slowdown` (off by default:
  about +1 run a sweep) also runs that check, without the evidence, once the search has
  settled (a slowdown that large could hide a faster value there; a run farther below
  it, or none after it, changes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.rules import SLOWDOWN_CHECK, SLOWDOWN_CONFIRM
from sweepd.kinds.model_perf.search.space import (
    NOISE,
    Outcome,
    Probe,
    SearchSpace,
    Step,
    Value,
    mean_tgs,
    means,
)
from sweepd.kinds.model_perf.search.suspect import suspect
from sweepd.kinds.model_perf.thresholds import THRESHOLDS

# The largest slowdown looked for (a degraded GPU, thermal throttling).
SLOW_MAX = THRESHOLDS.slow_max
# A drop is a slowdown beyond this many of two runs' noise (FLAT): the difference of two
# runs carries both runs' noise, sqrt(2) x one run's, so FLAT x sqrt(2) is two standard
# deviations of it. At FLAT alone, one drop (unconfirmed) asked in 5 % of the bench's
# check_slowdown sweeps where nothing slowed.
BAR = math.sqrt(2)


@dataclass(frozen=True)
class Pair:
    """`value` ran as probe `first` and again as probe `again`, reading `drop` (a share)
    off: a slowdown, if it is one, began at a run after `first` and no later than `again`."""

    value: Value
    first: int
    again: int
    drop: float


@dataclass(frozen=True)
class Slowdown:
    """The drop that showed it, the run that confirmed it, and the probes (`since` ..
    `until`, both included) at one of which the readings fell: where the two windows
    overlap."""

    shown: Pair
    confirmed: Pair
    since: int
    until: int


def slow_bar(space: SearchSpace) -> float:
    """How far (a share) a value run again must read below an earlier run of it to say the
    nodes may have slowed: FLAT x sqrt(2), at the noise the runs' steps show (`BAR`)."""
    return space.flat * BAR


def watching(space: SearchSpace, probes: Sequence[Probe] = ()) -> bool:
    """Values run again are read for a slowdown: the spec asks (check_slowdown), or the
    noise is above NOISE, where the best and its rivals run again anyway (`repeat`), so the
    check costs no run there (bar one to confirm a drop), or the runs point at a slowdown
    (`suspect`, read on each value's first run: it holds through the check it buys). Not
    any value run twice: `measure_noise`'s second run of the best reads its gap as the
    noise. Off once a person resumed past the stop (`slowdown_seen`)."""
    return not space.slowdown_seen and (space.check_slowdown or space.noise > NOISE
                                        or suspect(space, probes) is not None)


def slowdown(space: SearchSpace, probes: Sequence[Probe]) -> Slowdown | None:
    """A drop beyond `slow_bar` confirmed by a second one: another value whose runs
    straddle part of the same stretch read lower beyond two runs' noise (FLAT), or the
    value a third time read below its first run beyond the bar (noise seldom repeats; a
    slowdown does). One drop alone is not enough: over a sweep's pairs at 1.3 % noise it
    came by chance in 3.7 % of the bench's sweeps where nothing slowed."""
    if not watching(space, probes):
        return None
    pairs = _pairs(probes)
    for shown in _drops(space, pairs):
        for other in pairs:
            if _confirms(space, shown, other):
                return Slowdown(shown, other, max(shown.first, other.first) + 1,
                                min(shown.again, other.again))
    return None


def confirm_run(space: SearchSpace, probes: Sequence[Probe]) -> Step | None:
    """A drop neither confirmed nor answered yet: the run that tells. Another value run
    before the drop's first run (the latest such), whose two runs then span the whole
    drop: a slowdown there reads it lower too; else the value a third time."""
    if not watching(space, probes):
        return None
    pairs = _pairs(probes)
    for shown in _drops(space, pairs):
        if any(_answers(space, shown, other) for other in pairs if other is not shown):
            continue
        before = [k for k, p in enumerate(probes[:shown.first]) if _counts(p)
                  and p.value != shown.value]
        value = probes[before[-1]].value if before else shown.value
        how = (f"so {value}, run before it, runs again: a slowdown reads it lower too"
               if value != shown.value else
               f"so {value} runs a third time: a slowdown reads it low again")
        return Step(value, f"{shown.value} read {shown.drop:+.1%} on its run again, beyond the "
                           f"noise of two runs' difference ({slow_bar(space):.1%}): a node that "
                           "slowed (throttling, a degraded GPU) would read every later run "
                           f"lower, {how}, and the noise does not repeat", repeat=True,
                    rule=SLOWDOWN_CONFIRM.id)
    return None


def pending(space: SearchSpace, probes: Sequence[Probe]) -> Pair | None:
    """A drop beyond the bar that no run confirmed or answered (the budget ran out)."""
    if not watching(space, probes) or slowdown(space, probes) is not None:
        return None
    pairs = _pairs(probes)
    return next((d for d in _drops(space, pairs)
                 if not any(_answers(space, d, o) for o in pairs if o is not d)), None)


def _counts(p: Probe) -> bool:
    return not p.earlier and p.outcome is Outcome.OK and bool(p.tgs)


def _pairs(probes: Sequence[Probe]) -> list[Pair]:
    """Every later run of a value against every earlier one, in the later run's order."""
    out = []
    for k, p in enumerate(probes):
        if _counts(p):
            out += [Pair(p.value, i, k, (p.tgs or 0.0) / (q.tgs or 1.0) - 1)
                    for i, q in enumerate(probes[:k]) if _counts(q) and q.value == p.value]
    return out


def _drops(space: SearchSpace, pairs: Sequence[Pair]) -> list[Pair]:
    return [p for p in pairs if p.drop < -slow_bar(space)]


def _confirms(space: SearchSpace, shown: Pair, other: Pair) -> bool:
    """`other` reads a drop over a stretch that shares runs with `shown`'s."""
    if other is shown or other.again <= shown.first or other.first >= shown.again:
        return False
    if other.value == shown.value:
        return other.first == shown.first and other.again > shown.again and \
            other.drop < -slow_bar(space)
    return other.drop < -space.flat


def _answers(space: SearchSpace, shown: Pair, other: Pair) -> bool:
    """`other` confirms the drop, or spans all of it without one: a slowdown within its
    stretch would have read it lower, so the drop was the noise."""
    if _confirms(space, shown, other):
        return True
    if other.value == shown.value:
        return other.first == shown.first and other.again > shown.again
    return other.first <= shown.first and other.again >= shown.again


def check_run(space: SearchSpace, probes: Sequence[Probe], settled: bool = True
              ) -> Step | None:
    """The best runs again when a later run, read as much as SLOW_MAX low, could be faster
    than it (the verdict would compare runs from before and after a possible slowdown): once
    the search has `settled`, with the spec's check_slowdown; at any point, by default,
    where the runs point at a slowdown (`suspect`: a later run below the chord of earlier
    ones), once a sweep and only at the default noise (above it the best runs again anyway).
    None when nothing turns on it."""
    if space.slowdown_seen:
        return None
    why = None
    if not (settled and space.check_slowdown):
        if space.noise > NOISE or _pairs(probes):
            return None   # the best runs again anyway, or a value ran twice: drops are read
        why = suspect(space, probes)
        if why is None:
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
    asks = "the spec's check_slowdown" if why is None else \
        f"the runs point at it: {why}"
    return Step(top, f"the best, {top}, ran before {names}, which read within "
                     f"{SLOW_MAX:.0%} of it: were the nodes to slow after it (a node "
                     "throttling, a degraded GPU), those later runs would read low and the "
                     f"verdict compare runs that are not comparable, so {top} runs again; "
                     "reading lower beyond the noise of two runs' difference "
                     f"({slow_bar(space):.1%}), the runs are not one curve ({asks})",
                repeat=True, rule=SLOWDOWN_CHECK.id)
