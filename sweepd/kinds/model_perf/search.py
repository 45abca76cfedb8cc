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
* The first probe is at ~75% of the estimated max (SKILL.md Step 3), the second at the
  predicted max fit. Without any memory line the climb is geometric (>= 1.5x, SKILL.md's
  "second probe at 1.5x the first"), never one value at a time.
* Everything at or above the lowest OOM/FAILED value, or above the largest value the fitted
  line proves cannot fit, is never probed.
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
  the best are explored rather than settled (a second peak past the valley).
* Tile alignment is a real GPU effect: a batch at a multiple of 8 (or 4) may run a few %
  faster than its neighbours. A loose target (the first probe, a midpoint, a step below
  the lowest run) moves to the most aligned batch within 12.5% of it, which costs nothing
  and measures the faster curve. Once a run off the multiples measures that far below the
  chord of two multiples either side (or, with a valley seen, a multiple that far above
  the chord of two runs off them), the multiples either side of the best run next: the
  secants through the slower batches between them bound nothing there.

Categorical spaces (e.g. `remat_policy`) have no order to exploit: every value is tried.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

Value = int | float | str

START_FRACTION = 0.75  # first probe at ~75% of the estimated max (SKILL.md Step 3)
CLIMB = 1.5  # without a memory line, climb 1.5x (SKILL.md: "second probe at 1.5x the first")
TOLERANCE = 0.005
NOISE = 0.01  # run-to-run TGS noise: closer than this, two runs cannot be told apart
# Two runs measured this far apart may still be level: each carries the noise, so their
# difference reaches twice it (a floor's two runs read 1.8% apart at 0.8% std noise).
FLAT = 2 * NOISE
MAX_BATCH = 4096
STEP_NOISE = 6.0  # a step from the best aims at a TGS change of this many noise widths
STEP_SHARE = 0.5  # ... but goes at most this share of the way across its gap
BOTTOM_STEP = 0.5  # below the lowest value run, probe at this fraction of it
DESCENT_AIM = 0.9  # after one OOM, aim at this fraction of its one-run line's prediction
OOM_MARGIN_GB = 0.05  # an OOM run needed at least this much more than the usable pool
STEP_TIME_NOISE = 0.02  # the step-time bound allows this much noise on the run it starts at
ALIGN_SLACK = 0.125  # a loose target (a first probe, a midpoint) may move this share to align
ALIGN_MAX = 3  # alignment counts up to a multiple of 2**3 = 8 (tile sizes)
LADDER_STEP = 0.5  # multi_peak: below the lowest run, halve ...
LADDER_FLOOR = 8  # ... while the lowest run is at least this batch
MEMORY_MARGIN = 0.01  # of the pool: aim this far under it (fragmentation, runtime buffers)


class Outcome(StrEnum):
    OK = "ok"
    OOM = "oom"
    FAILED = "failed"  # a silent OOM (a compile hang before the memory line) etc.
    # Hung twice after its compiled-memory line said the program fits: too slow at this
    # batch. An upper bound from throughput (a larger batch is slower still), never a
    # lesson for the memory model.
    SLOW = "slow"


@dataclass(frozen=True)
class Probe:
    value: Value
    outcome: Outcome
    tgs: float | None
    # What the run's log said about memory (GB as printed); None when it did not say.
    temp_gb: float | None = None  # compiled Temp size: grows with the batch
    fixed_gb: float | None = None  # compiled Total - Temp: params, optimizer state, outputs
    limit_gb: float | None = None  # the pool (Memstats `Using (GB) … / limit`)
    alloc_gb: float | None = None  # the allocation an OOM failed on
    earlier: bool = False  # an earlier sweep's run, standing in for one not run here

    @property
    def silent(self) -> bool:
        """A failure that names no allocation size: where memory ran out is unknown."""
        return self.outcome is not Outcome.OK and self.alloc_gb is None


@dataclass(frozen=True)
class SearchSpace:
    candidates: tuple[Value, ...]
    estimate_index: int | None
    ordered: bool = True
    estimate_source: str = "the memory estimate"  # named in the first probe's reason
    start: Value | None = None  # the first probe, when an earlier sweep says where to start
    start_why: str = ""
    # An earlier sweep of the same cell: its runs stand in for values this one has not run,
    # their TGS scaled by how this sweep's runs compare with it at the same values.
    prior: tuple[Probe, ...] = ()
    # The value is the work in one step (the batch): a step at a larger value never takes
    # less time, so TGS at b is at most TGS at a smaller run a times b / a.
    work_grows: bool = False
    # The curve may have a second peak below the runs (another kernel or schedule taking
    # over at small batches: a valley between two peaks). Off by default: see _ladder.
    multi_peak: bool = False


@dataclass(frozen=True)
class Step:
    value: Value
    why: str  # the bound or prediction that chose it (shown by `explain`)


def batch_space(estimated_max: int, lower: int = 1, upper: int | None = None,
                source: str = "the memory estimate") -> SearchSpace:
    """Every integer batch size in lower..upper (default up to MAX_BATCH): the true optimum
    is an integer, and the search skips what memory and the curve rule out, so a coarser
    grid would only hide the peak."""
    top = MAX_BATCH if upper is None else upper
    if top < lower:
        raise ValueError(f"upper {top} < lower {lower}")
    estimate = min(max(estimated_max, lower), top)
    return SearchSpace(tuple(range(lower, top + 1)), estimate - lower, estimate_source=source,
                       work_grows=True)


def best(probes: Sequence[Probe]) -> Probe | None:
    """The OK probe with the highest TGS (earliest on a tie), or None if nothing ran."""
    ok = [p for p in probes if p.outcome is Outcome.OK and p.tgs is not None]
    return max(ok, key=lambda p: p.tgs or 0.0, default=None)


def next_value(space: SearchSpace, probes: Sequence[Probe]) -> Value | None:
    """The next value to run, or None when the search has converged."""
    step = next_probe(space, probes)
    return None if step is None else step.value


def next_probe(space: SearchSpace, probes: Sequence[Probe],
               runs_left: int | None = None) -> Step | None:
    """The next value to run and the bound or prediction that chose it; `runs_left`: what
    is left of the run budget (None: unlimited)."""
    tried = {p.value for p in probes}
    if not space.ordered:
        value = next((c for c in space.candidates if c not in tried), None)
        return None if value is None else Step(value, "categorical: every value is tried")
    seen = [*probes, *_scaled_prior(space, probes)]
    view = _View.of(space, seen)
    top = best(seen)
    if top is not None and top.value not in tried and top.value in space.candidates \
            and space.candidates.index(top.value) < view.cliff:
        return Step(top.value, f"the earlier sweep's TGS, scaled to this one's, is highest at "
                               f"{top.value}: measure it here")
    found = _next_index(view, runs_left)
    return None if found is None else Step(space.candidates[found[0]], found[1])


def _scaled_prior(space: SearchSpace, probes: Sequence[Probe]) -> list[Probe]:
    """The earlier sweep's runs at values this one has not run, once this sweep has run one
    of its values: TGS scaled by the ratio at the values both ran (the nodes or the day
    may be a little faster or slower), memory as it was (the same config)."""
    mine = {p.value: p.tgs for p in probes if p.outcome is Outcome.OK and p.tgs}
    ratios = [mine[p.value] / p.tgs for p in space.prior
              if p.value in mine and p.outcome is Outcome.OK and p.tgs]
    if not ratios:
        return []
    scale = statistics.fmean(ratios)
    return [replace(p, tgs=p.tgs * scale if p.tgs is not None else None, earlier=True)
            for p in space.prior if p.value not in mine and p.outcome is Outcome.OK]


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
    view = _View.of(space, [*probes, *_scaled_prior(space, probes)])
    k = view.n - 1 if up_to is None else view.last_at_most(up_to)
    if k < 0:
        return 0.0
    if k >= view.ceiling or not view.ok:
        return math.inf
    found = [t for i, t in view.ok.items() if i <= k]
    return max([*found, *(_bound(view, sorted(view.ok), g.lo, g.hi, k) for g in _gaps(view)
                          if g.lo + 1 <= k)])


def flat_top(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """Why the best may not be the exact optimum: a measured neighbour within the noise."""
    top = best(probes)
    if top is None or not space.ordered or top.value not in space.candidates:
        return None
    i = space.candidates.index(top.value)
    near = [p for p in probes if p.outcome is Outcome.OK and p.tgs is not None
            and p.value in space.candidates and abs(space.candidates.index(p.value) - i) == 1
            and p.tgs >= (1 - NOISE) * (top.tgs or 0.0)]
    if not near:
        return None
    names = ", ".join(str(p.value) for p in near)
    return (f"flat top: {names} measured within {NOISE:.0%} (the run-to-run noise) of "
            f"{top.value}, so either may be the faster")


def why_not_run(space: SearchSpace, probes: Sequence[Probe],
                values: Sequence[Value]) -> dict[Value, str | None]:
    """What ruled out each of `values` that no probe ran: the failure or OOM at or below
    it, the compiled-memory line, the TGS trend, or an earlier sweep's run of it. None:
    nothing did (the search would still have run it)."""
    tried = {p.value for p in probes}
    left = [v for v in values if v not in tried]
    if not space.ordered:
        return dict.fromkeys(left)
    view = _View.of(space, [*probes, *_scaled_prior(space, probes)])
    where = {v: i for i, v in enumerate(space.candidates)}
    return {v: _ruled_out(view, probes, where[v]) if v in where else None for v in left}


def _ruled_out(view: _View, probes: Sequence[Probe], i: int) -> str | None:
    if i in view.ok:
        return "the earlier sweep ran it"
    if i >= view.cliff:
        at = view.name(view.cliff)
        oom = any(p.value == at and p.outcome is Outcome.OOM for p in probes)
        return f"at or above the OOM at {at}" if oom else \
            f"at or above the failed run at {at} (taken as its limit, like an OOM)"
    if i >= view.proven and view.fit is not None:
        return (f"the compiled-memory line predicts it does not fit (largest fit "
                f"~{view.fit.max_fit():.1f})")
    if not view.ok:
        return None
    top = max(view.ok.values())
    gap = next((g for g in _gaps(view) if g.lo < i < g.hi), None)
    if gap is None or gap.bound > top * (1 + TOLERANCE):
        return None
    if gap.trend > top * (1 + TOLERANCE):
        return (f"a step never takes less time at a larger batch, so TGS there is at most "
                f"{view.name(gap.lo)}'s times the batch ratio: {gap.bound / top - 1:+.1%} "
                "over the best")
    return f"the TGS trend there allows at most {gap.bound / top - 1:+.1%} over the best"


# -- memory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryFit:
    """Compiled memory as a line in the value: need(v) = base + slope * v, against `limit`."""

    slope: float  # GB per unit of the value
    base: float  # GB at value 0: the fixed part plus temp's constant
    limit: float  # GB usable: the pool, lowered below what any OOM run needed
    points: int  # distinct values with a temp size
    why: str

    def max_fit(self) -> float:
        return (self.limit - self.base) / self.slope


def _numeric(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def memory_fit(probes: Sequence[Probe]) -> MemoryFit | None:
    """The line through the runs' compiled temp sizes, or None without a line and a pool."""
    temps: dict[float, list[float]] = {}
    for p in probes:
        if p.temp_gb is not None and _numeric(p.value) and float(p.value) > 0:
            temps.setdefault(float(p.value), []).append(p.temp_gb)
    fixed = [p.fixed_gb for p in probes if p.fixed_gb is not None]
    limits = [p.limit_gb for p in probes if p.limit_gb is not None]
    if not temps or not fixed or not limits:
        return None
    xs = sorted(temps)
    ys = [statistics.fmean(temps[x]) for x in xs]
    slope, intercept = _line(xs, ys)
    if slope <= 0:
        return None
    base = statistics.median(fixed) + intercept
    limit, lowered = min(limits), ""
    for p in probes:  # what an OOM run needed did not fit, whatever the pool says
        # Only an OOM: a run too slow at its batch (its program fitted) says nothing of
        # memory, and neither does a failure below a pass (it bounds nothing there).
        if p.outcome is Outcome.OOM and p.temp_gb is not None and p.fixed_gb is not None \
                and not _below_pass(p, probes):
            needed = p.temp_gb + p.fixed_gb - OOM_MARGIN_GB
            if needed < limit:
                limit, lowered = needed, f" (lowered by the OOM at {p.value})"
    shape = (f"temp {ys[0]:.1f} GB at {_fmt(xs[0])}, through 0" if len(xs) == 1 else
             f"temp fitted over {len(xs)} runs ({', '.join(_fmt(x) for x in xs)})")
    why = (f"compiled memory: {shape} = {slope:.2f} GB per batch + {base:.1f} GB fixed, "
           f"pool {limit:.1f} GB{lowered}")
    return MemoryFit(slope, base, limit, len(xs), why)


def _below_pass(p: Probe, probes: Sequence[Probe]) -> bool:
    """A failure at a value below one that passed (on the same nodes): memory grows with
    the value, so it contradicts the pass and bounds nothing below it."""
    return _numeric(p.value) and any(
        q.outcome is Outcome.OK and not q.earlier and _numeric(q.value)
        and float(q.value) > float(p.value) for q in probes)


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares; one point: through the origin (temp is mostly activations)."""
    if len(xs) == 1:
        return ys[0] / xs[0], 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def _alloc_floor(probes: Sequence[Probe], fit: MemoryFit | None) -> tuple[float, str] | None:
    """An OOM that failed allocating X GB was at most X short: the largest fit is at least
    its value less X / slope. Only with a fitted slope: one run's line through the origin
    over-states the slope, and with it this floor."""
    if fit is None or fit.points < 2:
        return None
    floors = [(float(p.value) - p.alloc_gb / fit.slope, p) for p in probes
              if p.outcome is Outcome.OOM and p.alloc_gb is not None and _numeric(p.value)]
    if not floors:
        return None
    x, p = max(floors, key=lambda f: f[0])
    return x, f"the OOM at {p.value} failed allocating {p.alloc_gb:.1f} GB"


# -- the search ------------------------------------------------------------------------


@dataclass(frozen=True)
class _View:
    """Probes mapped onto candidate indices; `x` places each candidate on its value axis."""

    x: tuple[float, ...]  # numeric value of each candidate (its index if not numeric)
    ok: dict[int, float]  # index -> measured TGS, only below the cliff
    cliff: int  # lowest failing index; n when nothing failed
    tried: frozenset[int]
    estimate: int | None
    source: str
    values: tuple[Value, ...]
    fit: MemoryFit | None
    pred: int | None  # index of the largest candidate memory predicts to fit (-1: none)
    pred_why: str
    proven: int  # lowest index memory proves cannot fit (n when it proves nothing)
    start: int | None = None
    start_why: str = ""
    cliff_silent: bool = False  # the lowest failure names no allocation size
    blocked: frozenset[int] = frozenset()  # failed below a pass: never probed again
    cliff_slow: bool = False  # the lowest failure was too slow (hung after it fitted)
    work_grows: bool = False  # SearchSpace.work_grows, on a numeric axis
    # How far (a share of the best) a run measured below the chord of the runs either side
    # of it, where that is beyond two runs' noise (FLAT): evidence that the curve is not
    # concave (a valley, a batch off the tile multiples); 0 without such evidence.
    dip: float = 0.0
    own: frozenset[int] = frozenset()  # indices this sweep ran (not an earlier sweep's)
    multi_peak: bool = False  # SearchSpace.multi_peak, on a batch axis

    @property
    def n(self) -> int:
        return len(self.x)

    @property
    def ceiling(self) -> int:
        return min(self.cliff, self.proven)

    def name(self, i: int) -> Value:
        return self.values[i]

    @classmethod
    def of(cls, space: SearchSpace, probes: Sequence[Probe]) -> _View:
        where = {v: i for i, v in enumerate(space.candidates)}
        known = [(where[p.value], p) for p in probes if p.value in where]
        # A failure below a pass contradicts it (memory grows with the value): it bounds
        # nothing below the pass, and is not run again (plan.py re-runs a silent one once).
        top_ok = max((i for i, p in known if p.outcome is Outcome.OK and not p.earlier),
                     default=-1)
        fails = sorted(((i, p) for i, p in known if p.outcome is not Outcome.OK),
                       key=lambda ip: ip[0])
        above = [(i, p) for i, p in fails if i > top_ok]
        cliff = above[0][0] if above else len(space.candidates)
        silent = bool(above) and all(p.silent for i, p in above if i == cliff)
        slow = any(p.outcome is Outcome.SLOW for i, p in above if i == cliff)
        blocked = frozenset(i for i, _ in fails if i < top_ok)
        ok = {i: p.tgs or 0.0 for i, p in known if p.outcome is Outcome.OK and i < cliff}
        # The valley and tile rules read this sweep's runs only: an earlier sweep acted on
        # its own evidence, and its runs, scaled to this one's, carry a second noise.
        own = frozenset(i for i, p in known if not p.earlier)
        numeric = all(_numeric(v) for v in space.candidates)
        x = tuple(float(v) if numeric else float(i) for i, v in enumerate(space.candidates))
        fit = memory_fit(probes) if numeric else None
        pred, why, proven = _predict(x, fit, _alloc_floor(probes, fit), max(ok, default=-1))
        return cls(x, ok, cliff, frozenset(i for i, _ in known), space.estimate_index,
                   space.estimate_source, space.candidates, fit, pred, why, proven,
                   where.get(space.start) if space.start is not None else None,
                   space.start_why, silent, blocked, slow, space.work_grows and numeric,
                   _dip(x, {i: t for i, t in ok.items() if i in own}), own,
                   space.multi_peak and space.work_grows and numeric)

    def nearest(self, target: float, lo: int, hi: int) -> int:
        """The index in lo..hi whose value is closest to target (the higher one on a tie)."""
        def key(i: int) -> tuple[float, int]:
            return abs(self.x[i] - target), -i

        if hi - lo > 64:  # sorted values: bisect rather than scan thousands of integers
            k = min(max(bisect.bisect_left(self.x, target, lo, hi + 1), lo), hi)
            near = [i for i in range(max(lo, k - 1), min(hi, k + 1) + 1)
                    if i not in self.blocked]
            if near:
                return min(near, key=key)
        free = [i for i in range(lo, hi + 1) if i not in self.blocked]
        return min(free or range(lo, hi + 1), key=key)

    def aligned(self, target: float, lo: int, hi: int, slack: float) -> int:
        """The batch in lo..hi within `slack` of target that is the most aligned (a
        multiple of 8, else 4, else 2; the nearest on a tie): a target this loose loses
        nothing by moving, and an aligned batch fills the GPU's tiles (it may run faster
        than its neighbours, which a run off the multiples never shows). Elsewhere: the
        nearest."""
        near = self.nearest(target, lo, hi)
        if not self.work_grows or slack < 1:
            return near
        a = max(lo, self.last_at_most(target - slack) + 1)
        b = min(hi, self.last_at_most(target + slack))
        pick = [i for i in range(a, b + 1) if i not in self.blocked and i not in self.tried
                and self.x[i] == int(self.x[i]) and self.x[i] > 0]
        if near not in self.tried:
            pick.append(near)
        return max(pick, key=lambda i: (_alignment(self.x[i]), -abs(self.x[i] - target), i),
                   default=near)

    def last_at_most(self, target: float) -> int:
        """The highest index whose value is <= target (-1 when none is)."""
        return bisect.bisect_right(self.x, target + 1e-9) - 1


def _dip(x: tuple[float, ...], ok: dict[int, float]) -> float:
    """The deepest a run measured below the chord through the runs either side of it, as
    a share of the best, when deeper than two runs' noise (else 0). A concave curve lies on
    or above every chord; a run below one beyond the noise is a valley the secants would
    bound over."""
    points = sorted(ok)
    if len(points) < 3:
        return 0.0
    top = max(ok.values())
    if top <= 0:
        return 0.0  # nothing measured any throughput: no share of it to compare
    deepest = 0.0
    for a, b, c in zip(points, points[1:], points[2:], strict=False):
        chord = ok[a] + (ok[c] - ok[a]) * (x[b] - x[a]) / (x[c] - x[a])
        deepest = max(deepest, (chord - ok[b]) / top)
    return deepest if deepest > FLAT else 0.0


def _alignment(v: float) -> int:
    """How aligned a batch is: 3 for a multiple of 8, 2 of 4, 1 of 2, else 0."""
    n = int(v)
    if n != v or n <= 0:
        return 0
    return min(ALIGN_MAX, (n & -n).bit_length() - 1)


def _predict(x: tuple[float, ...], fit: MemoryFit | None, floor: tuple[float, str] | None,
             top_ok: int) -> tuple[int | None, str, int]:
    """(index memory predicts is the largest fit, why, lowest index it proves cannot fit)."""
    n = len(x)
    if fit is None:
        return None, "", n
    limit = fit.max_fit()
    # Aim a margin under the pool: allocator fragmentation and buffers outside the compiled
    # program OOM a batch whose total is just under it. Past the margin, up to the pool,
    # the TGS trend decides whether one more value is worth a run.
    likely = (fit.limit * (1 - MEMORY_MARGIN) - fit.base) / fit.slope
    pred = bisect.bisect_right(x, likely + 1e-9) - 1
    can = bisect.bisect_right(x, limit + 1e-9) - 1
    why = f"{fit.why} -> largest fit ~{likely:.1f} ({MEMORY_MARGIN:.0%} under the pool)"
    trusted = fit.points >= 2 and can >= top_ok
    if floor is not None and floor[0] > limit:
        pred, trusted = bisect.bisect_right(x, floor[0] + 1e-9) - 1, False
        why += f"; but {floor[1]}, so it fits up to ~{floor[0]:.1f}"
    # With two or more points the line is measured, not assumed, so the value past the
    # prediction needs more than the pool: it cannot fit. Unless a pass above says the line
    # over-states memory.
    proven = can + 1 if trusted else n
    return pred, why, min(proven, n)


@dataclass(frozen=True)
class _Gap:
    lo: int  # known index below the gap (-1 at the bottom)
    hi: int  # known index above it (the ceiling, or n at the top)
    bound: float  # highest TGS the gap could hold; inf when nothing bounds it
    # The bound from the secants alone (the TGS trend), without the step-time bound: it
    # orders the open gaps and picks how to probe one, so the step-time bound settles
    # gaps without reordering the search (bar the flat floor, _on_floor).
    trend: float = math.inf


Choice = tuple[int, str]


def _open_gaps(view: _View) -> list[_Gap]:
    top = max(view.ok.values())
    return [g for g in _gaps(view) if g.bound > top * (1 + TOLERANCE)]


def _beside_best(view: _View, gaps: Sequence[_Gap]) -> list[_Gap]:
    best_i = max(view.ok, key=lambda i: view.ok[i])
    return [g for g in gaps if best_i in (g.lo, g.hi)]


def _next_index(view: _View, runs_left: int | None = None) -> Choice | None:
    if view.cliff == 0:
        return None  # even the smallest value fails: nothing fits
    if not view.ok:
        return _descend(view)
    top = max(view.ok.values())
    tiles = _aligned_next(view)
    if tiles is not None:
        return tiles
    gaps = _open_gaps(view)
    if not gaps:
        return _ladder(view)
    beside = _beside_best(view, gaps)
    if runs_left is not None and beside and runs_left <= len(beside):
        # The budget is nearly spent: the optimum can only be next to the best, so the
        # last runs close the gaps there before any other.
        gap = max(beside, key=lambda g: (g.trend, g.lo))
        i, why = _probe_in(view, gap, top)
        return i, f"{why}; {runs_left} run{'s' * (runs_left != 1)} left: the gap beside " \
                  "the best goes first"
    # Above the highest value that ran first, while it could hold a better TGS: memory
    # decides where the cliff is, and the peak is usually near it. Then unbounded gaps, the
    # highest first (SKILL.md Step 7: after an OOM, probe between the last good value and it).
    if _below_first(view, gaps):
        gap = next(g for g in gaps if g.lo < 0)
        i, why = _probe_in(view, gap, top)
        return i, (f"{why}: below the one pass first, since {view.name(view.cliff)} above it "
                   "hung or failed without an allocation size; if TGS falls toward it, the "
                   "secant settles the gap up to it")
    floor = _on_floor(view)
    gap = max(gaps, key=lambda g: (floor and g.lo < 0 and math.isinf(g.bound),
                                   g.lo == max(view.ok), g.trend, g.lo))
    i, why = _probe_in(view, gap, top)
    if view.dip:
        why += (f"; a run measured {view.dip:.1%} of the best below the chord of the runs "
                "either side of it (beyond two runs' noise: the curve is not concave), so "
                "every secant allows that much more")
    if floor and gap.lo < 0:
        why += ("; below first: the best and a pass next to it measured flat under a value "
                "too slow to run (the floor of a steep fall), so the peak can only be below, "
                "where runs are short; the gaps between them are bounded by step time")
    return i, why


def _ladder(view: _View) -> Choice | None:
    """multi_peak: the search would stop, its gaps settled by the concave bound; but a
    second peak below the runs, past a valley, lies under every secant through them (the
    runs on the upper peak's slope are concave within the noise, so no valley shows). So
    before stopping, halve below the lowest run (LADDER_STEP) while it is at least
    LADDER_FLOOR, whatever the secants say. A run there that measures above the trend is
    a new best or a valley (_dip), and the usual rules explore it. A departure from
    SKILL.md, whose narrowing assumes one peak (a lower TGS ends the search): on a curve
    with two it reports the peak its probes started on, which may be the lower one."""
    if not view.multi_peak:
        return None
    low = min(view.ok)
    if view.x[low] < LADDER_FLOOR:
        return None
    target = LADDER_STEP * view.x[low]
    i = view.aligned(target, 0, low - 1, ALIGN_SLACK * target) if low > 0 else -1
    if i < 0 or i in view.tried or i in view.blocked:
        return None
    return i, (f"~{LADDER_STEP:.0%} of the lowest run ({view.name(low)}), whatever the TGS "
               "trend says: the spec says the curve may have a second peak (multi_peak), "
               "which a valley would hide below every secant through the runs; SKILL.md's "
               "narrowing assumes one peak and would stop here")


def _tile(view: _View) -> int | None:
    """The batch multiple (8, else 4) the runs show running faster than the batches
    between: a run off the multiples measured beyond two runs' noise (FLAT) below the
    chord of the two runs either side of it, both multiples (a concave curve never lies
    below a chord). A run at a multiple that far above the chord of two runs off them
    counts only once some run lies below a chord (`dip`): a concave curve's kink lies above
    its chords too. None without that evidence."""
    points = sorted(i for i in view.ok if i in view.own)
    if not view.work_grows or len(points) < 3:
        return None
    top = max(view.ok[i] for i in points)
    for size in (8, 4):
        on = [int(view.x[i]) % size == 0 for i in points]
        for k in range(1, len(points) - 1):
            if on[k - 1] != on[k + 1] or on[k] == on[k - 1] or (on[k] and not view.dip):
                continue
            a, b, c = points[k - 1], points[k], points[k + 1]
            chord = view.ok[a] + (view.ok[c] - view.ok[a]) * (view.x[b] - view.x[a]) / \
                (view.x[c] - view.x[a])
            if (view.ok[b] - chord if on[k] else chord - view.ok[b]) > FLAT * top:
                return size
    return None


def _aligned_next(view: _View) -> Choice | None:
    """Once the runs show a batch multiple running faster (tile alignment: _tile), the
    multiples either side of the best are the likeliest faster batches, whatever the
    secants through the slower batches between say: run them, nearest the rising side
    first. A concave bound over the batches off the multiples cannot bound the multiples."""
    size = _tile(view)
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


def _on_floor(view: _View) -> bool:
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
    return any(view.ok[j] >= (1 - FLAT) * view.ok[best_i] for j in near)


def _below_first(view: _View, gaps: Sequence[_Gap]) -> bool:
    """One pass, below a failure that names no allocation size (a hang: too slow there),
    with more untried values below it than between it and the failure: whether TGS still
    rises is unknown, so the run goes below the pass first. If TGS falls toward the
    failure, the secant through the two settles the whole gap above in one run instead of a
    bisection toward it; if it rises, the bisection follows."""
    if len(view.ok) != 1 or not view.cliff_silent or view.cliff >= view.n:
        return False
    (only,) = view.ok
    return only > view.cliff - only and any(g.lo < 0 for g in gaps)


def open_beside_best(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """An unexplored gap beside the best that could still hold a faster value, said as
    `values lo+1..hi-1 beside the best (b) are not run`; None when there is none."""
    if not space.ordered:
        return None
    view = _View.of(space, [*probes, *_scaled_prior(space, probes)])
    if not view.ok:
        return None
    gaps = _beside_best(view, _open_gaps(view))
    if not gaps:
        return None
    best_i = max(view.ok, key=lambda i: view.ok[i])
    spans = [f"{view.name(g.lo + 1)}..{view.name(g.hi - 1)}" if g.hi - g.lo > 2
             else str(view.name(g.lo + 1)) for g in gaps]
    return (f"{' and '.join(spans)} beside the best ({view.name(best_i)}) "
            f"{'is' if len(spans) == 1 and '..' not in spans[0] else 'are'} not run, "
            "and the TGS trend does not rule out a faster value there")


def _descend(view: _View) -> Choice | None:
    """No value has run yet: start at ~75% of the estimate, or below the lowest failure."""
    if not view.tried:
        if view.start is not None:
            return view.start, view.start_why
        if view.estimate is None:
            return (view.n - 1) // 2, "first probe: the middle of the given values"
        target = START_FRACTION * view.x[view.estimate]
        return (view.aligned(target, 0, view.n - 1, ALIGN_SLACK * target),
                f"first probe at ~{START_FRACTION:.0%} of {view.source} "
                f"(max ~{view.name(view.estimate)})")
    failed = view.name(view.cliff)
    if view.cliff_silent:
        mid = view.aligned(0.5 * view.x[view.cliff], 0, view.cliff - 1,
                           ALIGN_SLACK * 0.5 * view.x[view.cliff])
        if view.pred is None or view.pred >= mid:
            return mid, (f"~50% of {failed}, which failed without an allocation size (so "
                         "it says not how far below it the limit is): bisect")
    if view.pred is not None and 0 <= view.pred < view.cliff and view.fit is not None:
        if view.fit.points >= 2:
            return view.pred, f"largest predicted to fit below the OOM at {failed}: " \
                              f"{view.pred_why}"
        # One OOM's line through the origin over-states what fits when temp has a constant
        # part: aim a little under it, so the run is likely to pass and measure TGS too.
        i = view.nearest(DESCENT_AIM * view.x[view.pred], 0, view.pred)
        return i, (f"~{DESCENT_AIM:.0%} of the largest predicted to fit below the OOM at "
                   f"{failed} (a one-run line errs high): {view.pred_why}")
    # No memory line: the failure is the best guess at the max, go to ~75% of it; if that
    # failed too the estimate is badly off, so halve rather than creep down.
    fraction = START_FRACTION if len(view.tried) < 2 and not view.cliff_silent else 0.5
    return (view.aligned(fraction * view.x[view.cliff], 0, view.cliff - 1,
                         ALIGN_SLACK * fraction * view.x[view.cliff]),
            f"~{fraction:.0%} of {failed}, the lowest value that failed (no compiled-memory "
            "line to predict from)")


def _gaps(view: _View) -> list[_Gap]:
    points = sorted(view.ok)
    edges = [-1, *points, view.ceiling]
    gaps = []
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        if hi - lo > 1 and any(i not in view.blocked for i in range(lo + 1, hi)):
            gaps.append(_Gap(lo, hi, _bound(view, points, lo, hi),
                             _bound(view, points, lo, hi, step_time=False)))
    return gaps


def _bound(view: _View, points: list[int], lo: int, hi: int, top: int | None = None,
           step_time: bool = True) -> float:
    """Concave upper bound on TGS over lo < i < hi (and i <= top) from the secants beside
    the gap."""
    x, tgs = view.x, view.ok
    lines: list[tuple[float, float, float]] = []  # (anchor value, tgs there, slope)
    # Where a run measured beyond the noise below the chord of its neighbours, the curve
    # is not concave: a valley as deep may hide a rise past any secant, so each secant is
    # raised by that depth (the gaps within it of the best are explored, not settled).
    lift = view.dip * max(tgs.values(), default=0.0)
    k = points.index(lo) if lo in tgs else -1
    if k >= 1:  # secant (points[k-1], lo) extended upward
        a = points[k - 1]
        lines.append((x[lo], tgs[lo] + lift, (tgs[lo] - tgs[a]) / (x[lo] - x[a])))
    j = points.index(hi) if hi in tgs else -1
    if 0 <= j < len(points) - 1:  # secant (hi, points[j+1]) extended downward
        c = points[j + 1]
        if lo < 0 and view.cliff_slow and tgs[c] - tgs[hi] <= FLAT * max(tgs[c], tgs[hi]):
            # Below the lowest run, under a value too slow to finish its first step, a
            # secant that does not rise beyond the noise bounds nothing: the flat stretch
            # may be the floor of a steep fall (issue 22's curve), the peak below it.
            return math.inf
        lines.append((x[hi], tgs[hi] + lift, (tgs[c] - tgs[hi]) / (x[c] - x[hi])))
    if step_time and view.work_grows and lo in tgs and x[lo] > 0:
        # A step's time never falls as its work grows: TGS at b is at most TGS at lo times
        # b / lo (a line through the origin; the noise on lo's run allowed for). It bounds
        # a gap above a run on a floor far below the best, where no secant does.
        lines.append((0.0, 0.0, tgs[lo] * (1 + STEP_TIME_NOISE) / x[lo]))
    if not lines:
        return math.inf

    def at(i: int) -> float:
        return min(y + s * (x[i] - x0) for x0, y, s in lines)

    # A minimum of lines peaks at an end or where two lines cross.
    where = {lo + 1, hi - 1}
    for (x0, y0, s0), (x1, y1, s1) in itertools.combinations(lines, 2):
        if s0 == s1:
            continue
        cross = (y1 - y0 + s0 * x0 - s1 * x1) / (s0 - s1)
        k = view.nearest(cross, lo + 1, hi - 1)
        where |= {max(lo + 1, k - 1), k, min(hi - 1, k + 1)}
    if top is not None:  # concave: the highest point at or below top is the clipped one
        where = {min(i, top) for i in where if lo + 1 <= top}
    return max(at(i) for i in where)


def _probe_in(view: _View, gap: _Gap, top: float) -> Choice:
    """Where to run inside a gap worth exploring, and why."""
    bound = "nothing bounds it" if math.isinf(gap.bound) else \
        f"the TGS trend allows up to {gap.bound / top - 1:+.1%} over the best"
    if gap.lo == max(view.ok):
        return _climb(view, gap, bound)
    best_i = max(view.ok, key=lambda i: view.ok[i])
    if math.isinf(gap.trend) and best_i in (gap.lo, gap.hi) and gap.lo >= 0:
        # Next to the best: a step from it that the TGS trend should tell apart from the
        # noise, so the secant through the two bounds the rest of that side.
        i = _step_from(view, best_i, gap)
        return i, (f"{view.name(i)} near the best ({view.name(best_i)}) between "
                   f"{_edge(view, gap.lo)} and {_edge(view, gap.hi)} ({bound}): the secant "
                   "through the two bounds the rest of that side")
    if math.isinf(gap.trend) and gap.lo < 0:
        # Nothing below the lowest good value: a step below it gives a secant that, on the
        # usual rising curve, settles the whole bottom gap in one run.
        i = view.aligned(BOTTOM_STEP * view.x[gap.hi], 0, gap.hi - 1,
                         ALIGN_SLACK * BOTTOM_STEP * view.x[gap.hi])
        return i, (f"~{BOTTOM_STEP:.0%} of the lowest value run ({view.name(gap.hi)}; "
                   f"{bound})")
    lower = view.x[gap.lo] if gap.lo >= 0 else view.x[0] - 1
    i = view.aligned((lower + view.x[gap.hi]) / 2, gap.lo + 1, gap.hi - 1,
                     ALIGN_SLACK * (view.x[gap.hi] - lower))
    return i, f"midpoint of {_edge(view, gap.lo)}..{_edge(view, gap.hi)} ({bound})"


def _step_from(view: _View, best_i: int, gap: _Gap) -> int:
    """The value beside the best whose TGS should differ from it by about twice the
    noise, going by the slope between the gap's two ends (at least the next value)."""
    other = gap.hi if best_i == gap.lo else gap.lo
    top = view.ok[best_i]
    slope = abs(view.ok.get(other, top) - top) / max(1e-9, abs(view.x[other] - view.x[best_i]))
    span = abs(view.x[other] - view.x[best_i])
    d = min(STEP_NOISE * NOISE * top / max(slope, 1e-12), STEP_SHARE * span)
    target = view.x[best_i] + (d if other > best_i else -d)
    lo, hi = gap.lo + 1, gap.hi - 1
    return view.nearest(target, lo, hi)


def _edge(view: _View, i: int) -> str:
    return "the bottom" if i < 0 else str(view.name(i)) if i < view.n else "the top"


def _climb(view: _View, gap: _Gap, bound: str) -> Choice:
    """Above the highest value that ran: the predicted max fit, else a geometric climb."""
    lo, hi = gap.lo, gap.hi
    if view.cliff_silent and hi == view.cliff:
        # The failure above names no allocation size (a silent OOM, a run too slow at its
        # batch): nothing says how far below it memory or time allows. Bisect between the
        # largest pass and it; never walk toward it one value at a time.
        i = view.aligned((view.x[lo] + view.x[hi]) / 2, lo + 1, hi - 1,
                         ALIGN_SLACK * (view.x[hi] - view.x[lo]))
        if view.pred is None or view.pred >= i:
            return i, (f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (failed "
                       "without an allocation size, so it says not how far below it the "
                       f"limit is): bisect ({bound})")
    if view.pred is not None and lo < view.pred < hi:
        return view.pred, f"largest predicted to fit: {view.pred_why}"
    if view.pred is not None and view.pred >= hi and hi < view.n:
        return hi - 1, (f"largest below the failure at {view.name(hi)}: {view.pred_why}")
    if view.fit is not None and view.pred is not None and view.pred <= lo:
        return lo + 1, (f"one above {view.name(lo)}: {view.pred_why}, but that line is "
                        f"{'from one run' if view.fit.points < 2 else 'contradicted by a pass'}; "
                        "this run tests it")
    if hi < view.n:  # an OOM above, no memory line: SKILL.md Step 7's midpoint
        i = view.aligned((view.x[lo] + view.x[hi]) / 2, lo + 1, hi - 1,
                         ALIGN_SLACK * (view.x[hi] - view.x[lo]))
        return i, (f"midpoint of {view.name(lo)} (ran) and {view.name(hi)} (failed); "
                   f"no compiled-memory line to predict from ({bound})")
    i = view.nearest(CLIMB * view.x[lo], lo + 1, hi - 1)
    i = max(i, lo + 1)
    return i, (f"climbing {CLIMB:g}x from {view.name(lo)}: nothing above it has failed and no "
               "compiled-memory line predicts the max")
