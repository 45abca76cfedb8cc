"""Rules for curves that are not one concave peak, each read from this sweep's runs: tile
alignment, the flat floor past a steep fall, a pass below a silent failure, and (the
spec's multi_peak) a second peak below the runs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from sweepd.kinds.model_perf import rules
from sweepd.kinds.model_perf.search.bounds import Choice, Gap, gap_bound
from sweepd.kinds.model_perf.search.space import (
    ALIGN_NOISE,
    ALIGN_SLACK,
    LADDER_DEPTH,
    LADDER_FLOOR,
    LADDER_GAP,
    LADDER_STEP,
    LADDER_VALLEY,
)
from sweepd.kinds.model_perf.search.view import View, tile_size


def ladder(view: View) -> Choice | None:
    """multi_peak: the search would stop, its gaps settled by the concave bound; but a
    second peak past a valley lies under every secant through the runs (the runs on the
    other peak's slope are concave within the noise, so no valley shows). So before
    stopping, halve below the lowest run (LADDER_STEP) while it is at least LADDER_FLOOR
    and measured within LADDER_DEPTH of the best, whatever the secants say; then bisect
    the widest gap below the best (`valley_gaps`) that a valley as deep as LADDER_VALLEY
    would open. A run there that measures above the trend is a new best or a valley
    (_dip), and the usual rules explore it. A departure from SKILL.md, whose narrowing
    assumes one peak (a lower TGS ends the search): on a curve with two it reports the
    peak its probes started on, which may be the lower one."""
    if not view.multi_peak:
        return None
    return _below_lowest(view) or _valley_gap(view)


def _below_lowest(view: View) -> Choice | None:
    low = min(view.ok)
    if view.x[low] < LADDER_FLOOR:
        return None
    if view.ok[low] < (1 - LADDER_DEPTH) * max(view.ok.values()):
        # Deeper below the best than a valley the ladder looks through: the lowest run is
        # on the rise below any peak, where TGS only falls further down.
        return None
    target = LADDER_STEP * view.x[low]
    i = view.aligned(target, 0, low - 1, ALIGN_SLACK * target) if low > 0 else -1
    if i < 0 or i in view.tried or i in view.blocked:
        return None
    return Choice(i, (f"~{LADDER_STEP:.0%} of the lowest run ({view.name(low)}), whatever the "
                      "TGS trend says: the spec says the curve may have a second peak "
                      "(multi_peak), which a valley would hide below every secant through the "
                      "runs; SKILL.md's narrowing assumes one peak and would stop here"),
                  rules.LADDER.id)


def valley_gaps(view: View) -> list[tuple[int, int]]:
    """The gaps between two runs below the best, each spanning at least LADDER_GAP of its
    upper run's value, whose bound would beat the best were every secant raised by a
    valley LADDER_VALLEY deep (as a valley seen raises them, `View.dip`), widest first:
    where a second peak could hide from runs concave within the noise (red team b04:
    4, 20, 24, 28, 32, 36 read concave, the peak at 6, 3 % above 28, inside 4..20)."""
    if not view.ok:
        return []
    best_i = view.best_index
    top = view.ok[best_i] * (1 + view.tolerance)
    lifted = replace(view, dip=max(view.dip, LADDER_VALLEY))
    points = sorted(view.ok)
    wide = [(lo, hi) for lo, hi in itertools.pairwise(points) if hi <= best_i
            and hi - lo > 2 and view.x[hi] - view.x[lo] >= LADDER_GAP * view.x[hi]
            and any(i not in view.blocked for i in range(lo + 1, hi))
            and gap_bound(lifted, points, lo, hi) > top]
    return sorted(wide, key=lambda g: (view.x[g[1]] - view.x[g[0]], g[1]), reverse=True)


def _valley_gap(view: View) -> Choice | None:
    """The midpoint of the widest of `valley_gaps`."""
    gaps = valley_gaps(view)
    if not gaps:
        return None
    lo, hi = gaps[0]
    best_i = view.best_index
    i = view.aligned((view.x[lo] + view.x[hi]) / 2, lo + 1, hi - 1,
                     ALIGN_SLACK * (view.x[hi] - view.x[lo]))
    return Choice(i, (f"midpoint of {view.name(lo)}..{view.name(hi)}, below the best "
                      f"({view.name(best_i)}), whatever the TGS trend says: the spec says the "
                      "curve may have a second peak (multi_peak), and a valley "
                      f"{LADDER_VALLEY:.0%} deep between these runs would leave room there for "
                      "a faster value; SKILL.md's narrowing assumes one peak and would stop "
                      "here"), rules.LADDER.id)


def aligned_next(view: View) -> Choice | None:
    """Once the runs show a batch multiple running faster (tile alignment: view.tile_size), the
    multiples either side of the best are the likeliest faster batches, whatever the
    secants through the slower batches between say: run them, nearest the rising side
    first. A concave bound over the batches off the multiples cannot bound the multiples."""
    size = tile_size(view)
    if size is None:
        return None
    best_i = view.best_index
    b = int(view.x[best_i])
    below = b - size if b % size == 0 else b - b % size
    above = below + (2 * size if b % size == 0 else size)
    ok_below = [view.ok[i] for i in view.ok if i < best_i]
    ok_above = [view.ok[i] for i in view.ok if i > best_i]
    rising_up = max(ok_above, default=0.0) >= max(ok_below, default=0.0)
    for v in ((above, below) if rising_up else (below, above)):
        i = view.last_at_most(v)
        if v < 1 or i < 0 or view.x[i] != v or i >= view.ceiling or i in view.tried \
                or i in view.blocked:
            continue
        return Choice(i, (f"{v}, the multiple of {size} next to the best ({b}): runs at "
                          f"multiples of {size} measured beyond the noise above the batches "
                          "between them (tile alignment), so the trend through those does "
                          "not bound it"), rules.TILE_MULTIPLE.id)
    return None


def on_floor(view: View) -> bool:
    """Under a value too slow to run, the best and a pass next to it measured flat (within
    two runs' noise, FLAT): the floor past a steep fall. Gaps there (even the one above
    the highest pass, toward the hang) are unbounded by the trend but bounded by step time,
    and each run on the floor is the slowest a pass can be; the bottom gap (unbounded either way)
    goes first, and a higher TGS found there settles the floor's gaps without running
    them."""
    if not view.cliff_slow:
        return False
    best_i = view.best_index
    above = [i for i in view.ok if i > best_i]
    below = [i for i in view.ok if i < best_i]
    near = ([min(above)] if above else []) + ([max(below)] if below else [])
    return any(view.ok[j] >= (1 - view.flat) * view.ok[best_i] for j in near)


def below_first(view: View, gaps: Sequence[Gap]) -> bool:
    """One pass, below a failure that names no allocation size (a hang: too slow there),
    with more untried values below it than between it and the failure: whether TGS still
    rises is unknown, so the run goes below the pass first. If TGS falls toward the
    failure, the secant through the two settles the whole gap above in one run instead of a
    bisection toward it; if it rises, the bisection follows."""
    if len(view.ok) != 1 or not view.cliff_silent or view.cliff >= view.n:
        return False
    (only,) = view.ok
    return only > view.cliff - only and any(g.lo < 0 for g in gaps)


def aligned_step(view: View, best_i: int, d: float, lo: int, hi: int) -> int:
    """The step from the best (`d` away, toward lo..hi), moved to the nearest multiple of 8
    within ALIGN_SLACK of it and d/3..d from the best: on a curve without tiles the
    secant through it bounds the rest of that side about as well, and on one with them it
    measures the faster curve (red team b07: the largest fit 50, the step 46; 48, a
    multiple of 16, ran 2.5 % faster and never ran). Only up to ALIGN_NOISE: above it a
    tile's few % are within two runs' noise, and the step's length is what tells the
    trend apart from the noise (the shorter secant cost two sweeps at 1.9 % run noise
    their verdicts)."""
    b = view.x[best_i]
    target = b + (d if view.x[lo] > b else -d)
    near = view.nearest(target, lo, hi)
    if not view.work_grows or view.flat > 2 * ALIGN_NOISE:
        return near  # not a batch (no tiles), or too noisy to see them
    reach = ALIGN_SLACK * abs(target)
    ends = sorted((target - reach, target + reach))
    a = max(lo, view.last_at_most(ends[0] - 1e-9) + 1)
    z = min(hi, view.last_at_most(ends[1]))
    tiles = [i for i in range(a, z + 1) if view.x[i] % 8 == 0 and i not in view.tried
             and i not in view.blocked and d / 3 <= abs(view.x[i] - b) <= d]
    return min(tiles, key=lambda i: abs(view.x[i] - target), default=near)
