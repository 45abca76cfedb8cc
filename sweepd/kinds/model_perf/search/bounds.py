"""The gaps between the runs and how high TGS could be in each: the concave bound from the
secants beside a gap (lifted by a valley seen) and the step-time bound for the batch."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sweepd.kinds.model_perf.search.space import SECANT_NOISE, STEP_TIME_NOISE
from sweepd.kinds.model_perf.search.view import View, tile_size


@dataclass(frozen=True)
class Gap:
    lo: int  # known index below the gap (-1 at the bottom)
    hi: int  # known index above it (the ceiling, or n at the top)
    bound: float  # highest TGS the gap could hold; inf when nothing bounds it
    # The bound from the secants alone (the TGS trend), without the step-time bound: it
    # orders the open gaps and picks how to probe one, so the step-time bound settles
    # gaps without reordering the search (bar the flat floor, on_floor).
    trend: float = math.inf


class Choice(NamedTuple):
    """A move of the search: the candidate's index, why (what `explain` shows) and the rule
    (`model_perf/rules.py`) the move is recorded under."""

    at: int
    why: str
    rule: str


def open_gaps(view: View) -> list[Gap]:
    top = max(view.ok.values())
    return [g for g in all_gaps(view) if g.bound > top * (1 + view.tolerance)]


def beside_best(view: View, gaps: Sequence[Gap]) -> list[Gap]:
    best_i = view.best_index
    return [g for g in gaps if best_i in (g.lo, g.hi)]


def assumed_beside_best(view: View) -> list[Gap]:
    """The gaps beside the best that did not run and that only the concave bound settled:
    not by step time alone (which holds on any curve), and with the runs showing the curve
    is not concave (`View.dip`). Empty without that evidence."""
    if not view.dip or not view.ok:
        return []
    top = max(view.ok.values()) * (1 + view.tolerance)
    return [g for g in beside_best(view, all_gaps(view))
            if not (view.work_grows and g.lo in view.ok and view.x[g.lo] > 0
                    and view.ok[g.lo] * (1 + STEP_TIME_NOISE) * view.x[g.hi - 1]
                    / view.x[g.lo] <= top)]


def flattens(view: View, points: list[int], lo: int, hi: int) -> int | None:
    """The gap's edge away from the best (lo, hi beside it), where the secant beyond it
    spans a bend: either of its runs measured below the chord of its neighbours beyond two
    runs' noise (`View.kinks`), and TGS falling from the best through the bend to the run
    past it (a fall that flattens: convex there). A concave bound holds only where the
    curve is concave; a secant over a convex stretch, extended, runs under it (red team
    y12: 5, 10, 15 read 1257, 716, 605; the line 10-15 put 6 at ~1019 with the valley
    lift, where it was 1400). None elsewhere: a valley's floor (TGS rising past it) and a
    bend the runs read as tile alignment (`tile_size`: the tile rule runs the multiples
    beside the best) keep the seed's lifted secants (`gap_bound`)."""
    if tile_size(view) is not None:
        return None  # the runs read as tile alignment: the bend is the tiles (shapes.py)
    best_i = view.best_index
    if best_i == lo:
        far = points[points.index(hi):] if hi in view.ok else []
    elif best_i == hi and lo >= 0:
        far = points[:points.index(lo) + 1][::-1]
    else:
        return None
    # far: the runs outward from the gap; its secant is far[0]-far[1]. A bend at either
    # run, and TGS falling from the best through it to the run past it.
    tgs = [view.ok[best_i], *(view.ok[i] for i in far[:3])]
    for k in (0, 1):
        if k + 1 < len(far) and far[k] in view.kinks \
                and all(a > b for a, b in itertools.pairwise(tgs[:k + 3])):
            return far[0]
    return None


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
    j = points.index(hi) if hi in tgs else -1
    left, right = k >= 1, 0 <= j < len(points) - 1
    # Beside the best, where the runs fall away from it less steeply past the gap than
    # across it (a fall that flattens), the far side's secant runs under the curve next
    # to the best: only the best's own side bounds the gap (`flattens`). Without a run
    # beyond the best on its own side, the far secant stands (lifted, as below) until the
    # gap past the best, unbounded, has run.
    far = flattens(view, points, lo, hi)
    if left and right and far is not None:
        left, right = far != lo, far != hi
    if left:  # secant (points[k-1], lo) extended upward
        a = points[k - 1]
        lines.append(_secant(x[lo], tgs[lo] + lift, (tgs[lo] - tgs[a]) / (x[lo] - x[a]),
                             x[lo] - x[a], view.flat))
    if right:  # secant (hi, points[j+1]) extended downward
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
