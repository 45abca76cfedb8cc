"""Model perf sweep: which value of one parameter gives the highest steady-state TGS.

Pure decisions (batch-sweep.SKILL.md "Model perf sweep", Steps 3 and 7): given the probes so
far, name the next value to run, or None when the sweep has converged.

Ordered spaces (batch sizes on a grid, sequence lengths, mem fractions) are searched as a
curve that rises, peaks and may fall, cut off by an OOM cliff. Distances are by value, so an
uneven grid (1, 2, 4, 8, 12, 16, ...) is handled:

* Start at the candidate nearest 75% of the estimated max, then climb while nothing above
  is known: one candidate at a time while the best is still a plausible max (within the
  estimate's error band), ~1.33x once past it.
* Everything at or above the lowest OOM/FAILED value is known to fail and never probed.
* Between known points TGS is assumed concave (it rises with diminishing returns, then
  falls to communication or memory pressure). The secant through two neighbouring probes,
  extended, then bounds how high TGS can be in an unprobed gap. A gap whose bound cannot
  beat the best by more than TOLERANCE is settled without running it. Otherwise the gap
  with the highest bound is bisected; unbounded gaps go highest first (after an OOM, the
  midpoint below it, as Step 7 says), and the open bottom gap is first probed just below
  the lowest good value, because one lower neighbour usually settles all of it.

Categorical spaces (e.g. `remat_policy`) have no order to exploit: every value is tried.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

Value = int | float | str

START_FRACTION = 0.75  # first probe at ~75% of the estimated max (SKILL.md Step 3)
CLIMB = 1.33  # past the estimate's band, climb ~1.33x (SKILL.md says "e.g. 1.5x"; 1.33
# measured ~0.5 runs cheaper): the estimate was wrong, so grow geometrically
ESTIMATE_BAND = 1 / 0.6  # the true max may be up to ~1.67x the estimate (formula-only error)
TOLERANCE = 0.005  # a gap that cannot beat the best by more than this is not worth a run


class Outcome(StrEnum):
    OK = "ok"
    OOM = "oom"
    FAILED = "failed"  # hung twice etc.: treated like OOM for direction


@dataclass(frozen=True)
class Probe:
    value: Value
    outcome: Outcome
    tgs: float | None


@dataclass(frozen=True)
class SearchSpace:
    candidates: tuple[Value, ...]
    estimate_index: int | None
    ordered: bool = True


GRID_POINTS = 8  # aim for ~6-10 stepped candidates between 0 and the default upper (2x estimate)


def batch_space(estimated_max: int, lower: int = 1, upper: int | None = None) -> SearchSpace:
    """A grid of batch sizes in lower..upper, like SKILL.md Step 8's 8, 12, 16, 20, 24.

    Neighbouring batch sizes differ by less than run-to-run noise, so sweeping every integer
    costs runs without telling them apart. The grid is the multiples of a power-of-two step
    (~estimate/4, so ~8 multiples up to the default upper of 2x estimate, room for an
    estimate 2x too low) plus the powers of two below the step and `lower` itself, so a
    search can still descend when even small batches OOM. Every power of two in range is
    on the grid. Give the spec explicit `values` for any other grid.
    """
    if upper is not None and upper < lower:
        raise ValueError(f"upper {upper} < lower {lower}")
    estimate = max(estimated_max, lower) if upper is None else min(max(estimated_max, lower), upper)
    step = 2 ** max(0, round(math.log2(max(1.0, 2 * estimate / GRID_POINTS))))
    if upper is None:  # the first grid value at or past 2x the estimate
        upper = -(-max(2 * estimate, lower + 7) // step) * step
    small = {2**k for k in range(step.bit_length()) if lower <= 2**k < step}
    stepped = set(range(-(-lower // step) * step, upper + 1, step))
    candidates = tuple(sorted(small | stepped | {lower}))
    index = min(range(len(candidates)), key=lambda i: (abs(candidates[i] - estimate), -i))
    return SearchSpace(candidates, index)


def best(probes: Sequence[Probe]) -> Probe | None:
    """The OK probe with the highest TGS (earliest on a tie), or None if nothing ran."""
    ok = [p for p in probes if p.outcome is Outcome.OK and p.tgs is not None]
    return max(ok, key=lambda p: p.tgs or 0.0, default=None)


def next_value(space: SearchSpace, probes: Sequence[Probe]) -> Value | None:
    """The next value to run, or None when the search has converged."""
    tried = {p.value for p in probes}
    if not space.ordered:
        return next((c for c in space.candidates if c not in tried), None)
    view = _View.of(space, probes)
    index = _next_index(view)
    return None if index is None else space.candidates[index]


@dataclass(frozen=True)
class _View:
    """Probes mapped onto candidate indices; `x` places each candidate on its value axis."""

    x: tuple[float, ...]  # numeric value of each candidate (its index if not numeric)
    ok: dict[int, float]  # index -> measured TGS, only below the cliff
    cliff: int  # lowest failing index; n when nothing failed
    tried: frozenset[int]
    estimate: int | None

    @property
    def n(self) -> int:
        return len(self.x)

    @classmethod
    def of(cls, space: SearchSpace, probes: Sequence[Probe]) -> _View:
        where = {v: i for i, v in enumerate(space.candidates)}
        known = [(where[p.value], p) for p in probes if p.value in where]
        fails = [i for i, p in known if p.outcome is not Outcome.OK]
        cliff = min(fails, default=len(space.candidates))
        ok = {i: p.tgs or 0.0 for i, p in known if p.outcome is Outcome.OK and i < cliff}
        numeric = all(isinstance(v, int | float) for v in space.candidates)
        x = tuple(float(v) if numeric else float(i) for i, v in enumerate(space.candidates))
        return cls(x, ok, cliff, frozenset(i for i, _ in known), space.estimate_index)

    def nearest(self, target: float, lo: int, hi: int) -> int:
        """The index in lo..hi whose value is closest to target (the higher one on a tie)."""
        return min(range(lo, hi + 1), key=lambda i: (abs(self.x[i] - target), -i))


@dataclass(frozen=True)
class _Gap:
    lo: int  # known index below the gap (-1 at the bottom)
    hi: int  # known index above it (the cliff, or n at the top)
    bound: float  # highest TGS the gap could hold; inf when nothing bounds it


def _next_index(view: _View) -> int | None:
    if view.cliff == 0:
        return None  # even the smallest value fails: nothing fits
    if not view.ok:
        return _descend(view)
    top = max(view.ok.values())
    gaps = [g for g in _gaps(view) if g.bound > top * (1 + TOLERANCE)]
    if not gaps:
        return None
    # Unbounded gaps tie: take the highest first (SKILL.md Step 7: after an OOM, probe
    # between the last good value and it) since the cliff side is where the peak usually is.
    gap = max(gaps, key=lambda g: (g.bound, g.lo))
    return _probe_in(view, gap)


def _descend(view: _View) -> int | None:
    """No value has run yet: start at ~75% of the estimate, or below the lowest failure."""
    if not view.tried:
        if view.estimate is None:
            return (view.n - 1) // 2
        return view.nearest(START_FRACTION * view.x[view.estimate], 0, view.n - 1)
    # The failure is now the best guess at the max: go to ~75% of it; if that failed too the
    # estimate is badly off, so halve (as Accelerate does) rather than creep down.
    fraction = START_FRACTION if len(view.tried) < 2 else 0.5
    return view.nearest(fraction * view.x[view.cliff], 0, view.cliff - 1)


def _gaps(view: _View) -> list[_Gap]:
    points = sorted(view.ok)
    edges = [-1, *points, view.cliff]
    gaps = []
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        if hi - lo > 1:
            gaps.append(_Gap(lo, hi, _bound(view, points, lo, hi)))
    return gaps


def _bound(view: _View, points: list[int], lo: int, hi: int) -> float:
    """Concave upper bound on TGS over lo < i < hi from the secants beside the gap."""
    x, tgs = view.x, view.ok
    lines: list[tuple[float, float, float]] = []  # (anchor value, tgs there, slope)
    k = points.index(lo) if lo in tgs else -1
    if k >= 1:  # secant (points[k-1], lo) extended upward
        a = points[k - 1]
        lines.append((x[lo], tgs[lo], (tgs[lo] - tgs[a]) / (x[lo] - x[a])))
    j = points.index(hi) if hi in tgs else -1
    if 0 <= j < len(points) - 1:  # secant (hi, points[j+1]) extended downward
        c = points[j + 1]
        lines.append((x[hi], tgs[hi], (tgs[c] - tgs[hi]) / (x[c] - x[hi])))
    if not lines:
        return math.inf
    return max(min(y + s * (x[i] - x0) for x0, y, s in lines) for i in range(lo + 1, hi))


def _probe_in(view: _View, gap: _Gap) -> int:
    """Where to run inside a gap worth exploring."""
    if gap.hi == view.n and gap.lo >= 0:
        # Open top, nothing known above the best yet: climb (SKILL.md Step 3.3). While the
        # best could still be the max, the cliff may be the very next value: stepping there
        # means an OOM settles the gap at once, where skipping a value costs a run to come
        # back for it (measured ~0.12 runs cheaper than 1.33x on the grid).
        if view.estimate is not None and view.x[gap.lo] < ESTIMATE_BAND * view.x[view.estimate]:
            return gap.lo + 1
        return view.nearest(CLIMB * view.x[gap.lo], gap.lo + 1, gap.hi - 1)
    if math.isinf(gap.bound):
        if gap.lo < 0:
            # Nothing below the lowest good value: its neighbour gives a secant that, on the
            # usual rising curve, settles the whole bottom gap in one run.
            return gap.hi - 1
        return (gap.lo + gap.hi) // 2
    # Bisect by value, not index: the small powers of two would pull index halves far down.
    # (Leaning towards where the bound peaks measured worse: it peaks at the gap's far end.)
    bottom = view.x[gap.lo] if gap.lo >= 0 else view.x[0] - 1
    top = view.x[gap.hi] if gap.hi < view.n else view.x[-1] + 1
    return view.nearest((bottom + top) / 2, gap.lo + 1, gap.hi - 1)
