"""Rules for curves that are not one concave peak, each read from this sweep's runs: tile
alignment, the flat floor past a steep fall, a pass below a silent failure, and (the
spec's multi_peak) a second peak below the runs."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.model_perf.search.bounds import Choice, Gap
from sweepd.kinds.model_perf.search.space import (
    ALIGN_SLACK,
    LADDER_DEPTH,
    LADDER_FLOOR,
    LADDER_STEP,
)
from sweepd.kinds.model_perf.search.view import View, tile_size


def ladder(view: View) -> Choice | None:
    """multi_peak: the search would stop, its gaps settled by the concave bound; but a
    second peak below the runs, past a valley, lies under every secant through them (the
    runs on the upper peak's slope are concave within the noise, so no valley shows). So
    before stopping, halve below the lowest run (LADDER_STEP) while it is at least
    LADDER_FLOOR and measured within LADDER_DEPTH of the best, whatever the secants say.
    A run there that measures above the trend is a new best or a valley (_dip), and the
    usual rules explore it. A departure from SKILL.md, whose narrowing assumes one peak (a
    lower TGS ends the search): on a curve with two it reports the peak its probes started
    on, which may be the lower one."""
    if not view.multi_peak:
        return None
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
    return i, (f"~{LADDER_STEP:.0%} of the lowest run ({view.name(low)}), whatever the TGS "
               "trend says: the spec says the curve may have a second peak (multi_peak), "
               "which a valley would hide below every secant through the runs; SKILL.md's "
               "narrowing assumes one peak and would stop here")


def aligned_next(view: View) -> Choice | None:
    """Once the runs show a batch multiple running faster (tile alignment: view.tile_size), the
    multiples either side of the best are the likeliest faster batches, whatever the
    secants through the slower batches between say: run them, nearest the rising side
    first. A concave bound over the batches off the multiples cannot bound the multiples."""
    size = tile_size(view)
    if size is None:
        return None
    best_i = max(view.ok, key=lambda i: view.ok[i])
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
        return i, (f"{v}, the multiple of {size} next to the best ({b}): runs at multiples "
                   f"of {size} measured beyond the noise above the batches between them "
                   "(tile alignment), so the trend through those does not bound it")
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
    best_i = max(view.ok, key=lambda i: view.ok[i])
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
