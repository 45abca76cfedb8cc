"""The next run: from the gaps still open and the memory line, where to probe and why (the
reason `explain` shows). Each move is its own rule (`model_perf/rules.py`, its `where`
names the function here that makes it): the first probe, the climb, the largest fit, a test
of the memory line, a bisection toward a failure, the secant step beside the best, a step
below the lowest run and a gap's midpoint. `next_index` picks which move; the move's
function picks the value."""

from __future__ import annotations

import math

from sweepd.kinds.model_perf import rules
from sweepd.kinds.model_perf.search.bounds import (
    Choice,
    Gap,
    beside_best,
    flattens,
    open_gaps,
)
from sweepd.kinds.model_perf.search.shapes import (
    aligned_next,
    aligned_step,
    below_first,
    ladder,
    on_floor,
)
from sweepd.kinds.model_perf.search.space import (
    ALIGN_SLACK,
    BOTTOM_STEP,
    CLIMB,
    DESCENT_AIM,
    START_FRACTION,
    STEP_NOISE,
    STEP_SHARE,
)
from sweepd.kinds.model_perf.search.view import View


def next_index(view: View, runs_left: int | None = None) -> Choice | None:
    if view.cliff == 0:
        return None  # even the smallest value fails: nothing fits
    if not view.ok:
        return descend(view)
    top = max(view.ok.values())
    tiles = aligned_next(view)
    if tiles is not None:
        return tiles
    gaps = open_gaps(view)
    if not gaps:
        return ladder(view)
    beside = beside_best(view, gaps)
    if runs_left is not None and beside and runs_left <= len(beside):
        # The budget is nearly spent: the optimum can only be next to the best, so the
        # last runs close the gaps there before any other.
        gap = max(beside, key=lambda g: (g.trend, g.lo))
        c = _probe_in(view, gap, top)
        return c._replace(why=f"{c.why}; {runs_left} run{'s' * (runs_left != 1)} left: the "
                              "gap beside the best goes first")
    # Above the highest value that ran first, while it could hold a better TGS: memory
    # decides where the cliff is, and the peak is usually near it. Then unbounded gaps, the
    # highest first (SKILL.md Step 7: after an OOM, probe between the last good value and it).
    if below_first(view, gaps):
        gap = next(g for g in gaps if g.lo < 0)
        c = _probe_in(view, gap, top)
        return c._replace(why=(
            f"{c.why}: below the one pass first, since {view.name(view.cliff)} above it "
            "hung or failed without an allocation size; if TGS falls toward it, the secant "
            "settles the gap up to it"))
    creep = [g for g in gaps if _creeps(view, g)]
    if creep and len(gaps) > len(creep):
        # Above the largest pass the memory line, contradicted by passes, can only say
        # "one more": climbing there one batch a run gains at most a batch's TGS each (red
        # team n02: 438, 439, 440, 441, then out of runs short of the peak at 400). The
        # gaps below go first; their runs put a trend on the top that may settle it.
        gaps = [g for g in gaps if g not in creep]
    floor = on_floor(view)
    gap = max(gaps, key=lambda g: (floor and g.lo < 0 and math.isinf(g.bound),
                                   g.lo == max(view.ok), g.trend, g.lo))
    i, why, rule = _probe_in(view, gap, top)
    if view.dip:
        why += (f"; a run measured {view.dip:.1%} of the best below the chord of the runs "
                "either side of it (beyond two runs' noise: the curve is not concave), so "
                "every secant allows that much more")
    if floor and gap.lo < 0:
        why += ("; below first: the best and a pass next to it measured flat under a value "
                "too slow to run (the floor of a steep fall), so the peak can only be below, "
                "where runs are short; the gaps between them are bounded by step time")
    return Choice(i, why, rule)


def descend(view: View) -> Choice | None:
    """No value has passed yet: the first probe, or below the lowest failure."""
    if not view.tried:
        return first_probe(view)
    if view.cliff_silent:
        c = _bisect(view, -1, view.cliff, (
            f"~50% of {view.name(view.cliff)}, which failed without an allocation size (so "
            "it says not how far below it the limit is): bisect"))
        if view.pred is None or view.pred >= c.at:
            return c
    return _under_failure(view) or _below_failure(view)


def first_probe(view: View) -> Choice:
    """Nothing has run: start at ~75% of the estimate (SKILL.md Step 3), where an earlier
    sweep says, or in the middle of the given values."""
    if view.start is not None:
        return Choice(view.start, view.start_why, rules.FIRST_PROBE.id)
    if view.estimate is None:
        return Choice((view.n - 1) // 2, "first probe: the middle of the given values",
                      rules.FIRST_PROBE.id)
    target = START_FRACTION * view.x[view.estimate]
    return Choice(view.aligned(target, 0, view.n - 1, ALIGN_SLACK * target),
                  f"first probe at ~{START_FRACTION:.0%} of {view.source} "
                  f"(max ~{view.name(view.estimate)})", rules.FIRST_PROBE.id)


def _under_failure(view: View) -> Choice | None:
    """Nothing passed, and a compiled-memory line predicts the largest fit below the lowest
    failure: run it."""
    if view.pred is None or not 0 <= view.pred < view.cliff or view.fit is None:
        return None
    failed = view.name(view.cliff)
    if view.fit.points >= 2:
        return Choice(view.pred, f"largest predicted to fit below the OOM at {failed}: "
                                 f"{view.pred_why}", rules.LARGEST_FIT.id)
    # One OOM's line through the origin over-states what fits when temp has a constant
    # part: aim a little under it, so the run is likely to pass and measure TGS too.
    i = view.nearest(DESCENT_AIM * view.x[view.pred], 0, view.pred)
    return Choice(i, (f"~{DESCENT_AIM:.0%} of the largest predicted to fit below the OOM at "
                      f"{failed} (a one-run line errs high): {view.pred_why}"),
                  rules.LARGEST_FIT.id)


def _below_failure(view: View) -> Choice:
    """No memory line: the failure is the best guess at the max, go to ~75% of it; if that
    failed too the estimate is badly off, so halve rather than creep down."""
    fraction = START_FRACTION if len(view.tried) < 2 and not view.cliff_silent else 0.5
    return Choice(view.aligned(fraction * view.x[view.cliff], 0, view.cliff - 1,
                               ALIGN_SLACK * fraction * view.x[view.cliff]),
                  f"~{fraction:.0%} of {view.name(view.cliff)}, the lowest value that failed "
                  "(no compiled-memory line to predict from)", rules.BELOW_FAILURE.id)


def _bisect(view: View, lo: int, hi: int, why: str) -> Choice:
    """Toward a failure at `hi` that says not where the limit is below it: the midpoint
    of the largest pass `lo` and it (lo -1: nothing passed, half of it), aligned."""
    if lo < 0:
        return Choice(view.aligned(0.5 * view.x[hi], 0, hi - 1, ALIGN_SLACK * 0.5 * view.x[hi]),
                      why, rules.BISECT.id)
    return Choice(view.aligned((view.x[lo] + view.x[hi]) / 2, lo + 1, hi - 1,
                               ALIGN_SLACK * (view.x[hi] - view.x[lo])), why, rules.BISECT.id)


def _probe_in(view: View, gap: Gap, top: float) -> Choice:
    """Where to run inside a gap worth exploring, and why: which move, by where the gap is."""
    bound = "nothing bounds it" if math.isinf(gap.bound) else \
        f"the TGS trend allows up to {gap.bound / top - 1:+.1%} over the best"
    if gap.lo == max(view.ok):
        return _climb(view, gap, bound)
    best_i = view.best_index
    far = flattens(view, sorted(view.ok), gap.lo, gap.hi) if gap.lo >= 0 else None
    if best_i in (gap.lo, gap.hi) and gap.lo >= 0 and (math.isinf(gap.trend)
                                                       or far is not None):
        return _secant_step(view, best_i, gap, bound, far)
    if math.isinf(gap.trend) and gap.lo < 0:
        return _below_lowest(view, gap, bound)
    return _midpoint(view, gap, bound)


def _secant_step(view: View, best_i: int, gap: Gap, bound: str, far: int | None) -> Choice:
    """Next to the best: a step from it that the TGS trend should tell apart from the
    noise, so the secant through the two bounds the rest of that side. Also across a fall
    that flattens (bounds.flattens), where a midpoint only halves the gap."""
    i = _step_from(view, best_i, gap)
    bend = "" if far is None else (
        f"; the runs fall less steeply past {view.name(far)} than across the gap (a "
        "fall that flattens: the curve is convex there), so the secant beyond it bounds "
        "nothing beside the best")
    return Choice(i, (f"{view.name(i)} near the best ({view.name(best_i)}) between "
                      f"{_edge(view, gap.lo)} and {_edge(view, gap.hi)} ({bound}): the secant "
                      f"through the two bounds the rest of that side{bend}"), rules.SECANT.id)


def _below_lowest(view: View, gap: Gap, bound: str) -> Choice:
    """Nothing below the lowest good value: a step below it gives a secant that, on the
    usual rising curve, settles the whole bottom gap in one run."""
    i = view.aligned(BOTTOM_STEP * view.x[gap.hi], 0, gap.hi - 1,
                     ALIGN_SLACK * BOTTOM_STEP * view.x[gap.hi])
    return Choice(i, f"~{BOTTOM_STEP:.0%} of the lowest value run ({view.name(gap.hi)}; "
                     f"{bound})", rules.BELOW_LOWEST.id)


def _midpoint(view: View, gap: Gap, bound: str) -> Choice:
    """A gap away from the best that its secants cannot settle: its midpoint."""
    lower = view.x[gap.lo] if gap.lo >= 0 else view.x[0] - 1
    i = view.aligned((lower + view.x[gap.hi]) / 2, gap.lo + 1, gap.hi - 1,
                     ALIGN_SLACK * (view.x[gap.hi] - lower))
    return Choice(i, f"midpoint of {_edge(view, gap.lo)}..{_edge(view, gap.hi)} ({bound})",
                  rules.MIDPOINT.id)


def _step_from(view: View, best_i: int, gap: Gap) -> int:
    """The value beside the best whose TGS should differ from it by about twice the
    noise, going by the slope between the gap's two ends (at least the next value)."""
    other = gap.hi if best_i == gap.lo else gap.lo
    top = view.ok[best_i]
    slope = abs(view.ok.get(other, top) - top) / max(1e-9, abs(view.x[other] - view.x[best_i]))
    span = abs(view.x[other] - view.x[best_i])
    d = min(STEP_NOISE * view.flat / 2 * top / max(slope, 1e-12), STEP_SHARE * span)
    return aligned_step(view, best_i, d, gap.lo + 1, gap.hi - 1)


def _edge(view: View, i: int) -> str:
    return "the bottom" if i < 0 else str(view.name(i)) if i < view.n else "the top"


def _over_line(view: View, lo: int, hi: int, bound: str) -> Choice:
    """Above the largest pass, where the compiled-memory line (the device's memory known:
    evidence, not proof) reads over the pool. Uncontradicted, the next value tests it: an
    OOM there confirms it, a pass calibrates it. Once a pass read over the pool, the line
    says not where the limit is above it: bisect toward the failure above, or climb as
    without a line, never one value a run."""
    cal = view.line_cal
    if cal is None or not cal.exceeded:
        return Choice(lo + 1, (f"one above {view.name(lo)}: {view.pred_why}; the line is an "
                               "estimate, so this run says whether it fits"),
                      rules.LINE_TEST.id)
    if hi < view.n:
        return _bisect(view, lo, hi, (
            f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (failed): {cal.why}, so "
            f"it says not where the limit is ({bound})"))
    return _climb_from(view, lo, hi, (f"{cal.why}, so it says not where the limit is, and "
                                      f"nothing above has failed ({bound})"))


def _creeps(view: View, gap: Gap) -> bool:
    """The gap above the largest pass would be probed one value above it (`_climb`'s
    test of a memory line that passes contradict)."""
    lo, hi = gap.lo, gap.hi
    if not view.ok or lo != max(view.ok) or view.fit is None or view.fit.points < 2 \
            or view.pred is None or view.pred > lo or hi - lo <= 2:
        return False
    return not ((view.cliff_silent or view.cliff_contradicts) and hi == view.cliff)


def _climb(view: View, gap: Gap, bound: str) -> Choice:
    """Above the highest value that ran: the predicted max fit, else a geometric climb."""
    lo, hi = gap.lo, gap.hi
    if view.cliff_silent and hi == view.cliff:
        # The failure above names no allocation size (a silent OOM, a run too slow at its
        # batch): nothing says how far below it memory or time allows. Bisect between the
        # largest pass and it; never walk toward it one value at a time.
        c = _bisect(view, lo, hi, (
            f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (failed without an "
            "allocation size, so it says not how far below it the limit is): bisect "
            f"({bound})"))
        if view.pred is None or view.pred >= c.at:
            return c
    if view.cliff_contradicts and hi == view.cliff:
        # OOMs where the memory measured says the batch fits, and one repeated: the memory
        # line no longer says where the limit is, and lowering the pool by each OOM walks
        # toward it one value at a time. Bisect, as for a failure without a size.
        return _bisect(view, lo, hi, (
            f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (ran out of memory "
            "where its own compiled-memory line and the passes' fit the pool with the margin "
            "to spare, as another OOM did, and an OOM repeated: the memory line says not "
            f"where the limit is): bisect ({bound})"))
    if view.line_cal is not None and view.line_cal.exceeded:
        # A pass read over the pool: the line (and an OOM's allocation read through its
        # slope) over-states memory by an unknown factor, so it places no limit above.
        return _over_line(view, lo, hi, bound)
    if view.pred is not None and lo < view.pred < hi:
        return Choice(view.pred, f"largest predicted to fit: {view.pred_why}",
                      rules.LARGEST_FIT.id)
    if view.pred is not None and view.pred >= hi and hi < view.n:
        return Choice(hi - 1, f"largest below the failure at {view.name(hi)}: {view.pred_why}",
                      rules.LARGEST_FIT.id)
    if view.fit is not None and view.pred is not None and view.pred <= lo:
        if view.line_cal is not None:
            return _over_line(view, lo, hi, bound)
        return Choice(lo + 1, (
            f"one above {view.name(lo)}: {view.pred_why}, but that line is "
            f"{'from one run' if view.fit.points < 2 else 'contradicted by a pass'}; "
            "this run tests it"), rules.LINE_TEST.id)
    if hi < view.n:  # an OOM above, no memory line: SKILL.md Step 7's midpoint
        return _bisect(view, lo, hi, (
            f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (failed); no "
            f"compiled-memory line to predict from ({bound})"))
    return _climb_from(view, lo, hi, "nothing above it has failed and no compiled-memory "
                                     "line predicts the max")


def _climb_from(view: View, lo: int, hi: int, why: str) -> Choice:
    """Above the largest pass `lo`, nothing saying where the limit is: CLIMB times it
    (SKILL.md: the second probe at 1.5x the first), never one value at a time."""
    i = max(view.nearest(CLIMB * view.x[lo], lo + 1, hi - 1), lo + 1)
    return Choice(i, f"climbing {CLIMB:g}x from {view.name(lo)}: {why}", rules.CLIMB.id)
