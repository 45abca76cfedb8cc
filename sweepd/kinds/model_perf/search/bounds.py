"""The gaps between the runs and how high TGS could be in each: the concave bound from the
secants beside a gap (lifted by a valley seen) and the step-time bound for the batch."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.search.space import SECANT_NOISE, STEP_TIME_NOISE
from sweepd.kinds.model_perf.search.view import View


@dataclass(frozen=True)
class Gap:
    lo: int  # known index below the gap (-1 at the bottom)
    hi: int  # known index above it (the ceiling, or n at the top)
    bound: float  # highest TGS the gap could hold; inf when nothing bounds it
    # The bound from the secants alone (the TGS trend), without the step-time bound: it
    # orders the open gaps and picks how to probe one, so the step-time bound settles
    # gaps without reordering the search (bar the flat floor, on_floor).
    trend: float = math.inf


Choice = tuple[int, str]


def open_gaps(view: View) -> list[Gap]:
    top = max(view.ok.values())
    return [g for g in all_gaps(view) if g.bound > top * (1 + view.tolerance)]


def beside_best(view: View, gaps: Sequence[Gap]) -> list[Gap]:
    best_i = max(view.ok, key=lambda i: view.ok[i])
    return [g for g in gaps if best_i in (g.lo, g.hi)]


def all_gaps(view: View) -> list[Gap]:
    points = sorted(view.ok)
    edges = [-1, *points, view.ceiling]
    gaps = []
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        if hi - lo > 1 and any(i not in view.blocked for i in range(lo + 1, hi)):
            gaps.append(Gap(lo, hi, gap_bound(view, points, lo, hi),
                             gap_bound(view, points, lo, hi, step_time=False)))
    return gaps


def gap_bound(view: View, points: list[int], lo: int, hi: int, top: int | None = None,
           step_time: bool = True) -> float:
    """Concave upper bound on TGS over lo < i < hi (and i <= top) from the secants beside
    the gap."""
    x, tgs = view.x, view.ok
    # Each bound: the highest of its lines (a secant widened far from its runs), the
    # gap's bound the lowest of those.
    lines: list[tuple[_Line, ...]] = []
    # Where a run measured beyond the noise below the chord of its neighbours, the curve
    # is not concave: a valley as deep may hide a rise past any secant, so each secant is
    # raised by that depth (the gaps within it of the best are explored, not settled).
    lift = view.dip * max(tgs.values(), default=0.0)
    k = points.index(lo) if lo in tgs else -1
    if k >= 1:  # secant (points[k-1], lo) extended upward
        a = points[k - 1]
        lines.append(_secant(x[lo], tgs[lo] + lift, (tgs[lo] - tgs[a]) / (x[lo] - x[a]),
                             x[lo] - x[a], view.flat))
    j = points.index(hi) if hi in tgs else -1
    if 0 <= j < len(points) - 1:  # secant (hi, points[j+1]) extended downward
        c = points[j + 1]
        if lo < 0 and (view.cliff_slow or x[c] >= 2 * x[hi]) \
                and tgs[c] - tgs[hi] <= view.flat * max(tgs[c], tgs[hi]):
            # Below the lowest run, under a value too slow to finish its first step or
            # along a stretch of twice its value, a secant that does not rise beyond the
            # noise bounds nothing: the flat stretch may be the floor of a steep fall
            # (issue 22's curve; a peak at 1 whose fall ends on a floor by 4), the peak
            # below it. A concave rise is that flat only on a plateau, where one small run
            # below settles it.
            return math.inf
        lines.append(_secant(x[hi], tgs[hi] + lift, (tgs[c] - tgs[hi]) / (x[c] - x[hi]),
                             x[hi] - x[c], view.flat))
    if step_time and view.work_grows and lo in tgs and x[lo] > 0:
        # A step's time never falls as its work grows: TGS at b is at most TGS at lo times
        # b / lo (a line through the origin; the noise on lo's run allowed for). It bounds
        # a gap above a run on a floor far below the best, where no secant does.
        lines.append(((0.0, 0.0, tgs[lo] * (1 + STEP_TIME_NOISE) / x[lo]),))
    if not lines:
        return math.inf

    def at(i: int) -> float:
        return min(max(y + s * (x[i] - x0) for x0, y, s in bound) for bound in lines)

    # A minimum of maxima of lines peaks at an end or where two lines cross.
    where = {lo + 1, hi - 1}
    every = [line for bound in lines for line in bound]
    for (x0, y0, s0), (x1, y1, s1) in itertools.combinations(every, 2):
        if s0 == s1:
            continue
        cross = (y1 - y0 + s0 * x0 - s1 * x1) / (s0 - s1)
        k = view.nearest(cross, lo + 1, hi - 1)
        where |= {max(lo + 1, k - 1), k, min(hi - 1, k + 1)}
    if top is not None:  # concave: the highest point at or below top is the clipped one
        where = {min(i, top) for i in where if lo + 1 <= top}
    return max(at(i) for i in where)



_Line = tuple[float, float, float]  # (anchor value, tgs there, slope)


def _secant(x0: float, y0: float, slope: float, span: float, flat: float
            ) -> tuple[_Line, ...]:
    """A secant through two runs `span` apart (negative: extended downward from x0),
    trusted as far again from x0 as its runs are apart, and past that widened by the
    noise on its runs: their difference may be off by `flat` of the TGS, so the slope by
    that over the span (SECANT_NOISE of it). Batches 399 and 400 read 1220 and 1234 by
    noise; their line, extended to 5, "settled" the gap that held the peak at 300."""
    line = (x0, y0, slope)
    if SECANT_NOISE <= 0:
        return (line,)
    widen = SECANT_NOISE * flat * y0 / abs(span)
    turn = x0 + span
    return line, (turn, y0 + slope * span, slope + (widen if span > 0 else -widen))
