"""An earlier sweep of the same cell (SearchSpace.prior): its runs, scaled to this sweep's,
stand in for the values not run here while the two curves are one up to a scale, and why
they stop standing in (`prior_mismatch`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweepd.kinds.model_perf.search.space import PRIOR_SHAPE, Outcome, Probe, SearchSpace, Value


@dataclass(frozen=True)
class PriorMismatch:
    """This sweep's runs and the earlier sweep's at the values both ran are not one curve
    up to a scale: (value, this sweep's TGS / the earlier one's) for the value whose ratio
    is beyond the drift, or for the two whose ratios disagree."""

    ratios: tuple[tuple[Value, float], ...]


def prior_mismatch(space: SearchSpace, probes: Sequence[Probe]) -> PriorMismatch | None:
    """Why the earlier sweep's runs no longer stand in, or None while they do. One shared
    value is the only evidence that the two curves have one shape: a ratio there beyond
    what noise and node variance explain (`space.prior_drift`), or two ratios that differ
    by more than the noise (PRIOR_SHAPE), and the curve has changed. The first evidence in
    this sweep's run order is named (it stays the same as the sweep goes on)."""
    if space.prior_drift is None:
        return None
    ratios = _prior_ratios(space, probes)
    for k, (value, ratio) in enumerate(ratios):
        if abs(ratio - 1) > space.prior_drift:
            return PriorMismatch(((value, ratio),))
        for other, before in ratios[:k]:
            if max(ratio, before) / min(ratio, before) - 1 > PRIOR_SHAPE:
                return PriorMismatch(((other, before), (value, ratio)))
    return None


def _prior_ratios(space: SearchSpace, probes: Sequence[Probe]) -> list[tuple[Value, float]]:
    """This sweep's TGS over the earlier one's at each value both ran, in this sweep's run
    order."""
    mine = {p.value: p.tgs for p in probes if p.outcome is Outcome.OK and p.tgs}
    return [(v, tgs / p.tgs) for v, tgs in mine.items() for p in space.prior
            if p.value == v and p.outcome is Outcome.OK and p.tgs]


def scaled_prior(space: SearchSpace, probes: Sequence[Probe]) -> list[Probe]:
    """The earlier sweep's runs at values this one has not run, once this sweep has run one
    of its values: TGS scaled by the ratio at the values both ran (the nodes or the day
    may be a little faster or slower), memory as it was (the same config). None once
    they show another curve (`prior_mismatch`): the search goes on as without them."""
    ratios = _prior_ratios(space, probes)
    if not ratios or prior_mismatch(space, probes) is not None or _held_back(space, ratios):
        return []
    mine = {p.value for p in probes if p.outcome is Outcome.OK and p.tgs}
    scale = statistics.fmean(r for _, r in ratios)
    return [replace(p, tgs=p.tgs * scale if p.tgs is not None else None, earlier=True)
            for p in space.prior if p.value not in mine and p.outcome is Outcome.OK]


def _held_back(space: SearchSpace, ratios: Sequence[tuple[Value, float]]) -> bool:
    """One shared value read off the earlier sweep by more than two runs' noise (FLAT):
    the level moved, and one ratio cannot tell a level from a shape (a peak moved 30 -> 28
    or 30 -> 32 read 0.96-0.98 at the old peak and the old curve settled the sweep there,
    2.3-3.8 % slow). Its runs wait for a second shared value whose ratio agrees
    (PRIOR_SHAPE); within FLAT one run still lets them stand in (the same cell again)."""
    return (space.prior_drift is not None and len(ratios) == 1
            and abs(ratios[0][1] - 1) > space.flat)
