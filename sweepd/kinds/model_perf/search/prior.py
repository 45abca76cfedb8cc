"""An earlier sweep of the same cell (SearchSpace.prior): its runs, scaled to this sweep's,
stand in for the values not run here while the two curves are one up to a scale, and why
they stop standing in (`prior_mismatch`), or stand in without their memory lines
(`prior_memory_moved`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweepd.kinds.model_perf.search.space import PRIOR_SHAPE, Outcome, Probe, SearchSpace, Value
from sweepd.kinds.model_perf.thresholds import THRESHOLDS

# One program compiles to the same memory on every run (the simulator and MaxText print GB
# to one decimal: two readings of one program differ by the rounding, 0.1 GB). Two readings
# at one value more than this share of the total apart (plus the rounding) are two programs:
# the code, the image or the sharding changed memory per batch (red team p11: 25 % apart).
MEMORY_AGREE = THRESHOLDS.memory_agree
MEMORY_ROUNDING_GB = THRESHOLDS.memory_rounding_gb


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


@dataclass(frozen=True)
class MemoryMoved:
    """This sweep's compiled-memory line and the earlier sweep's at one value both ran,
    beyond MEMORY_AGREE apart: (temp, fixed) GB of each."""

    value: Value
    mine: tuple[float, float]
    before: tuple[float, float]

    def said(self, sweep: str) -> str:
        return (f"{sweep}'s compiled-memory lines are not used: at {self.value} this sweep's "
                f"compiled memory is {self.mine[0]:.1f} GB temp + {self.mine[1]:.1f} GB fixed, "
                f"{sweep}'s {self.before[0]:.1f} + {self.before[1]:.1f} GB (more than "
                f"{MEMORY_AGREE:.0%} apart: another program), so only this sweep's runs "
                "predict what fits")


def prior_memory_moved(space: SearchSpace, probes: Sequence[Probe]) -> MemoryMoved | None:
    """The earlier sweep's memory lines do not hold here: at a value both ran, this sweep's
    compiled temp or fixed size differs from the earlier one's by more than MEMORY_AGREE of
    the total (plus the rounding). Its TGS may still stand in (`prior_mismatch` reads TGS);
    a line fitted over both programs predicts neither's fit. The first in run order."""
    for p in probes:
        if p.temp_gb is None or p.fixed_gb is None or p.earlier:
            continue
        for q in space.prior:
            if q.value != p.value or q.temp_gb is None or q.fixed_gb is None:
                continue
            tol = MEMORY_AGREE * max(p.temp_gb + p.fixed_gb, q.temp_gb + q.fixed_gb) \
                + MEMORY_ROUNDING_GB
            if abs(p.temp_gb - q.temp_gb) > tol or abs(p.fixed_gb - q.fixed_gb) > tol:
                return MemoryMoved(p.value, (p.temp_gb, p.fixed_gb), (q.temp_gb, q.fixed_gb))
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
    may be a little faster or slower), memory as it was (the same config) unless this
    sweep's memory line reads otherwise (`prior_memory_moved`). None once they show
    another curve (`prior_mismatch`): the search goes on as without them."""
    ratios = _prior_ratios(space, probes)
    if not ratios or prior_mismatch(space, probes) is not None or _held_back(space, ratios):
        return []
    mine = {p.value for p in probes if p.outcome is Outcome.OK and p.tgs}
    scale = statistics.fmean(r for _, r in ratios)
    kept = [replace(p, tgs=p.tgs * scale if p.tgs is not None else None, earlier=True)
            for p in space.prior if p.value not in mine and p.outcome is Outcome.OK]
    if prior_memory_moved(space, probes) is None:
        return kept
    return [replace(p, temp_gb=None, fixed_gb=None, limit_gb=None, alloc_gb=None) for p in kept]


def _held_back(space: SearchSpace, ratios: Sequence[tuple[Value, float]]) -> bool:
    """One shared value read off the earlier sweep by more than two runs' noise (FLAT):
    the level moved, and one ratio cannot tell a level from a shape (a peak moved 30 -> 28
    or 30 -> 32 read 0.96-0.98 at the old peak and the old curve settled the sweep there,
    2.3-3.8 % slow). Its runs wait for a second shared value whose ratio agrees
    (PRIOR_SHAPE); within FLAT one run still lets them stand in (the same cell again)."""
    return (space.prior_drift is not None and len(ratios) == 1
            and abs(ratios[0][1] - 1) > space.flat)
