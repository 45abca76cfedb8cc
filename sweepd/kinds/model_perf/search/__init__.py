"""Model perf sweep: which value of one parameter gives the highest steady-state TGS.

Pure decisions (batch-sweep.SKILL.md "Model perf sweep", Steps 3 and 7): given the probes so
far, name the next value to run and why, or None when the sweep has converged.

Ordered spaces (every integer batch size by default, or a spec's `values`) are searched as
a curve that rises, peaks and may fall, cut off by an OOM cliff:

* Memory is learnt from every run. MaxText prints the compiled memory after compilation
  (`Total memory size: …, Temp size: …, Argument size: …`); temp grows about linearly with
  the batch. One run's line predicts the largest batch that fits (temp through the origin,
  which over-states the slope when temp has a constant part, so the prediction is low if
  anything); two runs fit the line. A pass at b proves memory for b; an OOM lowers the
  usable pool below what that run needed, and its failed allocation (at least the shortfall)
  bounds the largest fit from below.
* An OOM whose own compiled-memory line and the passes' put it MEMORY_MARGIN under the pool
  contradicts the memory measured. One alone stands (SKILL.md: never re-run an OOM) and
  lowers the pool, as any OOM. A second shows the OOMs are flaky, not the limit: each such
  OOM is a one-off (`memory.one_offs`), bounds nothing and lowers no pool, and its value
  may run again; lowering the pool by each walked the search down one value a run. An OOM
  that repeats at its value makes every one stand again, and the climb then bisects
  toward the lowest of them rather than walk.
* The first probe is at ~75% of the estimated max (SKILL.md Step 3), the second at the
  predicted max fit. Without any memory line the climb is geometric (>= 1.5x, SKILL.md's
  "second probe at 1.5x the first"), never one value at a time.
* Everything at or above the lowest OOM/FAILED value, or above the largest value the fitted
  line proves cannot fit, is never probed.
* Where the device's memory is known (SearchSpace.device_gb; the kind passes the spec's or
  the cluster's), the line is evidence, not a cliff: only a failed run bounds the search.
  A pass whose line read above the pool proves the line over-states memory, and scales its
  predictions by pool / total (`memory.calibration`). A value whose calibrated line reads
  over the pool stays a candidate while the largest pass is the best or within two runs'
  noise of it (the peak may lie past the line): it runs after the gaps below (one above
  the largest pass tests an uncontradicted line; past a pass over the pool the climb is
  geometric or bisects toward the failure above). Where the runs fall from the best toward
  it, it is not run, and `why_not_run` calls the line an estimate, never "does not fit".
  The first probe (75% of the estimate) is unchanged.
* Between known points TGS is assumed concave (it rises with diminishing returns, then
  falls to communication or memory pressure). The secant through two neighbouring probes,
  extended, bounds how high TGS can be in an unprobed gap. A gap whose bound cannot beat
  the best by more than TOLERANCE is settled without running it. Next to the best, an
  unbounded gap is probed a step from the best that the TGS trend should tell apart from
  the noise: the secant through the two then bounds the rest of that side (SKILL.md
  "narrow the range"). Other gaps are bisected, down to neighbours.
* For the batch, a step never takes less time when it carries more work, so TGS at b is at
  most TGS at a smaller run a times b / a. That line through the origin also bounds a gap
  (it settles one above a run on the floor of a steep fall once a far higher TGS is found
  below, where no secant does). It settles gaps; the order stays the trend's, except on a
  flat floor under a value too slow to run (the best and a pass beside it measured flat:
  the floor past a steep fall), where the bottom gap, unbounded either way, goes first.
* A best whose measured neighbours are within the run-to-run noise is a flat top: the
  search may stop there and says so (`flat_top`).
* Concavity is an assumption, checked against the runs: a run measured below the chord of
  the runs either side of it by more than two runs' noise (FLAT) is a valley, which no
  concave curve has. Then every secant is raised by that depth, so the gaps within it of
  the best are explored rather than settled (a second peak past the valley). Beside the
  best, where the runs fall away from it through such a run and on past it less steeply
  (a fall that flattens: convex there), the far side's secant bounds nothing: only the
  best's own side bounds the gap, and its next run is a step from the best. A verdict
  whose gaps beside the best only the concave bound settled on such a curve says so.
* Tile alignment is a real GPU effect: a batch at a multiple of 8 (or 4) may run a few %
  faster than its neighbours. A loose target (the first probe, a midpoint, a step below
  the lowest run) moves to the most aligned batch within 12.5% of it, and the step from
  the best to a multiple of 8 as near (up to 1.5% noise), which costs nothing and
  measures the faster curve. Once a run off the multiples measures that far below the
  chord of two multiples either side (or, with a valley seen, a multiple that far above
  the chord of two runs off them), the multiples either side of the best run next: the
  secants through the slower batches between them bound nothing there.
* A second peak below the runs (the spec's `multi_peak`, off by default: a departure from
  SKILL.md's single-peak narrowing): before stopping, halve below the lowest run down to 8,
  then bisect a wide gap below the best that a valley 5% deep would open, whatever the
  secants say; a run there above the trend is explored by the rules above. Without it the
  verdict names such gaps (`second_peak_room`): runs concave within the noise hide a valley.
* An earlier sweep of the same cell (SearchSpace.prior): its runs stand in for values not
  run here, scaled by the ratio at the values both ran, while that ratio is within the
  noise and node variance (PRIOR_DRIFT) and the ratios agree (PRIOR_SHAPE). Beyond, its
  curve is not this one's up to a scale, and the search goes on as without it.

Categorical spaces (e.g. `remat_policy`) have no order to exploit: every value is tried.

The package: `space` (what is searched and what ran, the constants), `memory` (the
compiled-memory line), `view` (the runs on the candidates' axis), `bounds` (the gaps and
their concave and step-time bounds), `shapes` (tile alignment, the floor past a steep fall,
a pass below a silent failure, a second peak; `second_peak` says where one could hide),
`choose` (the next run and its reason), `repeat` (runs made again for the noise), `slowed`
(runs that are not comparable: the nodes slowed mid-sweep), `prior` (an earlier sweep's
runs standing in, and why they stop), and here the public questions: the next probe, the
bound left, why a value was not run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sweepd.kinds.model_perf import rules
from sweepd.kinds.model_perf.search.bounds import (
    Gap,
    all_gaps,
    assumed_beside_best,
    beside_best,
    gap_bound,
    open_gaps,
)
from sweepd.kinds.model_perf.search.choose import next_index
from sweepd.kinds.model_perf.search.memory import MemoryFit, memory_fit, one_offs
from sweepd.kinds.model_perf.search.prior import (
    MemoryMoved,
    PriorMismatch,
    prior_memory_moved,
    prior_mismatch,
    scaled_prior,
)
from sweepd.kinds.model_perf.search.repeat import (
    noise_probe,
    noise_said,
    repeat_top,
    with_run_noise,
)
from sweepd.kinds.model_perf.search.second_peak import second_peak_room
from sweepd.kinds.model_perf.search.slowed import Slowdown, check_run, confirm_run, slowdown
from sweepd.kinds.model_perf.search.space import (
    FLAT,
    MEMORY_MARGIN,
    NOISE,
    PRIOR_DRIFT,
    PRIOR_SHAPE,
    STEP_TIME_NOISE,
    TOLERANCE,
    Outcome,
    Probe,
    SearchSpace,
    Step,
    Value,
    batch_space,
    best,
    best_mean,
    mean_tgs,
    means,
)
from sweepd.kinds.model_perf.search.view import View

__all__ = ["FLAT", "MEMORY_MARGIN", "NOISE", "PRIOR_DRIFT", "PRIOR_SHAPE", "TOLERANCE",
           "MemoryFit", "MemoryMoved", "Outcome", "PriorMismatch", "Probe", "SearchSpace",
           "Slowdown", "Step", "Value", "batch_space", "bent_beside_best", "best", "best_mean",
           "flat_rivals", "flat_top", "means", "memory_fit", "next_probe", "next_value",
           "noise_said", "open_beside_best", "prior_memory_moved", "prior_mismatch",
           "second_peak_room", "slowdown", "upper_bound", "why_not_run", "with_run_noise"]


def next_value(space: SearchSpace, probes: Sequence[Probe]) -> Value | None:
    """The next value to run, or None when the search has converged."""
    step = next_probe(space, probes)
    return None if step is None else step.value


def next_probe(space: SearchSpace, probes: Sequence[Probe],
               runs_left: int | None = None, thorough: bool = False) -> Step | None:
    """The next value to run and the bound or prediction that chose it; `runs_left`: what
    is left of the run budget (None: unlimited). `thorough` (a one-parameter sweep): at a
    noise above NOISE, every rival within two runs' noise of the best runs again and the
    values beside it run (`repeat`), and the noise two runs of one value measured counts.
    A thorough search also reads its values run again for a slowdown (`slowed`): a drop
    beyond the noise is confirmed by one more run, and once confirmed the runs are not one
    curve: None, no step on them is taken (plan.py asks)."""
    if thorough:
        if slowdown(space, probes) is not None:
            return None
        confirm = confirm_run(space, probes) if runs_left is None or runs_left >= 1 else None
        if confirm is not None:
            return confirm
        space = with_run_noise(space, probes)
        probe = noise_probe(space, probes, runs_left)
        if probe is not None:
            return probe
        early = check_run(space, probes, settled=False) if runs_left is None or runs_left >= 2 \
            else None
        if early is not None:
            return early
    tried = {p.value for p in probes}
    if not space.ordered:
        return _categorical(space, tried)
    seen = [*probes, *scaled_prior(space, probes)]
    view = View.of(space, seen)
    earlier = _prior_best(space, seen, tried, view.cliff)
    if earlier is not None:
        return earlier
    found = next_index(view, runs_left)
    if found is None:
        check = check_run(space, probes) if thorough and (runs_left is None or runs_left >= 1) \
            else None
        return check or repeat_top(space, probes, runs_left, thorough)
    value = space.candidates[found.at]
    return Step(value, found.why + _one_off_note(probes, value), rule=found.rule)


def _categorical(space: SearchSpace, tried: set[Value]) -> Step | None:
    """No order to exploit: the next value not tried."""
    value = next((c for c in space.candidates if c not in tried), None)
    return None if value is None else Step(value, "categorical: every value is tried",
                                           rule=rules.CATEGORICAL.id)


def _prior_best(space: SearchSpace, seen: Sequence[Probe], tried: set[Value],
                cliff: int) -> Step | None:
    """An earlier sweep's runs (scaled) are highest at a value not run here: measure it."""
    top = best(seen)
    if top is not None and top.value not in tried and top.value in space.candidates \
            and space.candidates.index(top.value) < cliff:
        return Step(top.value, f"the earlier sweep's TGS, scaled to this one's, is highest at "
                               f"{top.value}: measure it here", rule=rules.PRIOR_BEST.id)
    return None


def _one_off_note(probes: Sequence[Probe], value: Value) -> str:
    """Said where one-off OOMs (memory.one_offs) decided the step: the value runs again
    after one, or the last run was one and bounds nothing."""
    off = one_offs(probes)
    if not off:
        return ""
    others = len(off) - 1
    why = (f"and {others} other OOM{'s' * (others != 1)} came where their own compiled-memory "
           "lines and the passes' fit the pool with the margin to spare: more than one, so "
           "they are taken as one-offs (flaky), not the limit")
    if any(probes[k].value == value for k in off):
        return f"; {value} runs again: its OOM {why} (an OOM that repeats stands)"
    last = len(probes) - 1
    return f"; the OOM at {probes[last].value} {why}, and bound nothing" if last in off else ""


def upper_bound(space: SearchSpace, probes: Sequence[Probe], up_to: float | None = None
                ) -> float:
    """The highest TGS this space could still hold at values up to `up_to` (default all):
    its best so far there or, over a gap not yet run, the concave bound from the secants
    beside it (inf: nothing bounds it, or `up_to` reaches past where these runs could
    fit). A two-parameter search compares it with the best of the other settings."""
    tried = {p.value for p in probes}
    if not space.ordered:
        return math.inf if any(c not in tried for c in space.candidates) else \
            max((p.tgs or 0.0 for p in probes if p.outcome is Outcome.OK), default=0.0)
    view = View.with_prior(space, probes)
    k = view.n - 1 if up_to is None else view.last_at_most(up_to)
    if k < 0:
        return 0.0
    if k >= view.ceiling or not view.ok:
        return math.inf
    found = [t for i, t in view.ok.items() if i <= k]
    return max([*found, *(gap_bound(view, sorted(view.ok), g.lo, g.hi, k) for g in all_gaps(view)
                          if g.lo + 1 <= k)])


def flat_top(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """Why the best may not be the exact optimum: another run measured within the noise,
    beside it or not (on a wide range 296 and 308 read within 0.4 % of 320, the truth's
    peak at 300 between them). Above NOISE, within two runs' noise (FLAT): the runs there
    are means of at most two, and 22 read 2.8 % under 24 went unnamed at 2.2 %."""
    top = best_mean(probes)
    near = flat_rivals(space, probes)
    if top is None or not near:
        return None
    within = space.flat if space.noise > NOISE else space.noise
    noise = f"{within:.1%}".replace(".0%", "%")
    what = "two runs' noise" if space.noise > NOISE else "the run-to-run noise"
    which = "either" if len(near) == 1 else f"any of these {len(near) + 1}"
    return (f"flat top: {', '.join(map(str, near))} measured within {noise} ({what}) of "
            f"{top.value}, so {which} may be the faster")


def flat_rivals(space: SearchSpace, probes: Sequence[Probe]) -> list[Value]:
    """The values other than the best measured within the noise of it (`flat_top`), in
    the candidates' order."""
    top = best_mean(probes)
    if top is None or not space.ordered or top.value not in space.candidates:
        return []
    runs = means(probes)
    mean = {v: mean_tgs(ps) for v, ps in runs.items()}
    within = space.flat if space.noise > NOISE else space.noise
    return sorted((v for v in runs if v in space.candidates and v != top.value
                   and mean[v] >= (1 - within) * (top.tgs or 0.0)),
                  key=space.candidates.index)


def why_not_run(space: SearchSpace, probes: Sequence[Probe],
                values: Sequence[Value]) -> dict[Value, str | None]:
    """What ruled out each of `values` that no probe ran: the failure or OOM at or below
    it, the compiled-memory line, the TGS trend, or an earlier sweep's run of it. None:
    nothing did (the search would still have run it)."""
    tried = {p.value for p in probes}
    left = [v for v in values if v not in tried]
    if not space.ordered:
        return dict.fromkeys(left)
    view = View.with_prior(space, probes)
    where = {v: i for i, v in enumerate(space.candidates)}
    return {v: _ruled_out(view, probes, where[v]) if v in where else None for v in left}


def _ruled_out(view: View, probes: Sequence[Probe], i: int) -> str | None:
    if i in view.ok:
        return "the earlier sweep ran it"
    if i >= view.cliff:
        at = view.name(view.cliff)
        oom = any(p.value == at and p.outcome is Outcome.OOM for p in probes)
        return f"at or above the OOM at {at}" if oom else \
            f"at or above the failed run at {at} (taken as its limit, like an OOM)"
    if i >= view.proven and view.line_cal is not None:
        return _over_line(view, i)
    if i >= view.proven and view.fit is not None:
        return (f"the compiled-memory line predicts it does not fit (largest fit "
                f"~{view.fit.max_fit():.1f})")
    if not view.ok:
        return None
    top = max(view.ok.values())
    gap = next((g for g in all_gaps(view) if g.lo < i < g.hi), None)
    if gap is None or gap.bound > top * (1 + view.tolerance):
        return _over_line(view, i)
    if gap.trend > top * (1 + view.tolerance):
        # Step time holds on any curve (a step never takes less time at a larger batch):
        # the bound at this value itself, from the run below the gap.
        step = view.ok[gap.lo] * (1 + STEP_TIME_NOISE) * view.x[i] / view.x[gap.lo]
        return (f"a step never takes less time at a larger batch, so TGS there is at most "
                f"{view.name(gap.lo)}'s times the batch ratio: {step / top - 1:+.1%} "
                "over the best")
    return _estimate(view, gap, top)


def _estimate(view: View, gap: Gap, top: float) -> str:
    """A value the secants beside its gap settled: what they put it at, said as the estimate
    it is with its basis. The secants bound TGS only where the curve is concave; real
    curves are dented (tile effects: on a TPU v5e chip 28 read +0.47 % over 24 where the
    secants beside it put it at -1.1 %, and 24 -1.5 % under 12 where they said -5.4 %),
    so no bound is claimed."""
    points = sorted(view.ok)
    lines = []
    if gap.lo in view.ok and points.index(gap.lo) >= 1:
        lines.append(f"{view.name(points[points.index(gap.lo) - 1])} and {view.name(gap.lo)}")
    if gap.hi in view.ok and points.index(gap.hi) + 1 < len(points):
        lines.append(f"{view.name(gap.hi)} and {view.name(points[points.index(gap.hi) + 1])}")
    through = " and through ".join(lines) or "the runs beside it"
    return (f"an estimate, not a run: the secants through {through} put it near "
            f"{gap.bound / top - 1:+.1%} over the best or below where the curve is concave; "
            "a dented curve can beat it")


def _over_line(view: View, i: int) -> str | None:
    """A value left for last because its compiled-memory line reads over the pool (the
    device's memory known): said as the estimate it is, never as "does not fit"."""
    if view.line_cal is None or view.fit is None or i < view.over_line:
        return None
    need = (view.fit.base + view.fit.slope * view.x[i]) * view.line_cal.scale
    return (f"its compiled-memory line reads ~{need:.1f} GB, over the "
            f"{view.fit.limit:.2f} GB pool, and the runs below fall from the best toward it; "
            "the line is an estimate and no run said it does not fit")


def open_beside_best(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """An unexplored gap beside the best that could still hold a faster value, said as
    `values lo+1..hi-1 beside the best (b) are not run`; None when there is none."""
    if not space.ordered:
        return None
    view = View.with_prior(space, probes)
    if not view.ok:
        return None
    gaps = beside_best(view, open_gaps(view))
    if not gaps:
        return None
    best_i = view.best_index
    spans = [view.span(g.lo, g.hi) for g in gaps]
    return (f"{' and '.join(spans)} beside the best ({view.name(best_i)}) "
            f"{'is' if len(spans) == 1 and '..' not in spans[0] else 'are'} not run, "
            "and the TGS trend does not rule out a faster value there")


def bent_beside_best(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """Values beside the best that did not run, settled by the concave bound alone, on a
    curve the runs showed is not concave: the verdict's caveat (an "optimum" 4-18 % slow
    went unsaid where a step had said the curve is not concave; red team y12)."""
    if not space.ordered:
        return None
    view = View.with_prior(space, probes)
    gaps = assumed_beside_best(view)
    if not gaps:
        return None
    best_i = view.best_index
    spans = [view.span(g.lo, g.hi) for g in gaps]
    them = "it" if len(spans) == 1 and ".." not in spans[0] else "them"
    return (f"{' and '.join(spans)} beside the best ({view.name(best_i)}) did not run: a "
            f"run measured {view.dip:.1%} of the best below the chord of its neighbours (the "
            f"curve is not concave), and only the concave TGS trend settled {them}")
