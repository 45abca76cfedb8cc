"""The runs mapped onto the candidate values (View): which passed and how fast, where the
lowest failure is, what memory predicts, whether the curve showed a valley (runs below the
chord of their neighbours) and whether the runs read as tile alignment (`tile_size`)."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.search.memory import (
    Calibration,
    MemoryFit,
    alloc_floor,
    calibration,
    capped,
    contradicting,
    line_evidence,
    memory_fit,
    one_offs,
    predict,
)
from sweepd.kinds.model_perf.search.prior import scaled_prior
from sweepd.kinds.model_perf.search.space import (
    ALIGN_MAX,
    FLAT,
    TOLERANCE,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    is_numeric,
)


@dataclass(frozen=True)
class View:
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
    # The runs so measured (each below the chord of its neighbours beyond FLAT): a secant
    # through one of them, extended past it, bounds nothing on the other side (bounds.py).
    kinks: frozenset[int] = frozenset()
    own: frozenset[int] = frozenset()  # indices this sweep ran (not an earlier sweep's)
    multi_peak: bool = False  # SearchSpace.multi_peak, on a batch axis
    flat: float = FLAT  # SearchSpace.flat: two runs' noise
    tolerance: float = TOLERANCE  # SearchSpace.tolerance: a gap above the best by this is open
    # The lowest failure is an OOM the memory measured says fits, and another OOM did too
    # (`memory.contradicting`), yet they stand (one repeated): how far below it the limit
    # is, the memory line cannot say.
    cliff_contradicts: bool = False
    # The device's memory is known (SearchSpace.device_gb): the line is evidence, calibrated
    # by `line_cal`; `over_line` is the lowest index whose calibrated line reads over the
    # pool (n: none). Those values are run only while the largest pass is the best or
    # within two runs' noise of it (`proven` is n then, else over_line), and are never said
    # not to fit without a failed run.
    line_cal: Calibration | None = None
    over_line: int = 0

    @property
    def n(self) -> int:
        return len(self.x)

    @property
    def ceiling(self) -> int:
        return min(self.cliff, self.proven)

    def name(self, i: int) -> Value:
        return self.values[i]

    @property
    def best_index(self) -> int:
        """The index of the fastest run (its mean where run again)."""
        return max(self.ok, key=lambda i: self.ok[i])

    def span(self, lo: int, hi: int) -> str:
        """The values strictly between indices lo and hi, as a verdict names them."""
        return (f"{self.name(lo + 1)}..{self.name(hi - 1)}" if hi - lo > 2
                else str(self.name(lo + 1)))

    @classmethod
    def with_prior(cls, space: SearchSpace, probes: Sequence[Probe]) -> View:
        """The runs with an earlier sweep's runs standing in for values not run here."""
        return cls.of(space, [*probes, *scaled_prior(space, probes)])

    @classmethod
    def of(cls, space: SearchSpace, probes: Sequence[Probe]) -> View:
        where = {v: i for i, v in enumerate(space.candidates)}
        # One-off OOMs (memory.one_offs) bound nothing: their values are as if not run.
        off = one_offs(probes)
        probes = [p for k, p in enumerate(probes) if k not in off]
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
        runs: dict[int, list[float]] = {}
        for i, p in known:
            if p.outcome is Outcome.OK and i < cliff:
                runs.setdefault(i, []).append(p.tgs or 0.0)
        ok = {i: statistics.fmean(ts) for i, ts in runs.items()}  # a value run again: its mean
        # The valley and tile rules read this sweep's runs only: an earlier sweep acted on
        # its own evidence, and its runs, scaled to this one's, carry a second noise.
        own = frozenset(i for i, p in known if not p.earlier)
        numeric = all(is_numeric(v) for v in space.candidates)
        x = tuple(float(v) if numeric else float(i) for i, v in enumerate(space.candidates))
        below = _below_chords(x, {i: t for i, t in ok.items() if i in own}, space.flat)
        fit = memory_fit(probes) if numeric else None
        floor = alloc_floor(probes, fit)
        cal = calibration(probes) if space.device_gb is not None else None
        if cal is None:
            pred, why, proven = predict(x, fit, floor, max(ok, default=-1))
            over = len(x)
        else:
            pred, why, over = line_evidence(x, fit, floor, cal)
            proven = len(x) if _rising_at_edge(ok, space.flat) else over
            # What an OOM's own sizes prove cannot fit is no estimate (memory.capped).
            proven = min(proven, capped(x, fit))
        return cls(x, ok, cliff, frozenset(i for i, _ in known), space.estimate_index,
                   space.estimate_source, space.candidates, fit, pred, why, proven,
                   where.get(space.start) if space.start is not None else None,
                   space.start_why, silent, blocked, slow, space.work_grows and numeric,
                   max(below.values(), default=0.0), frozenset(below), own,
                   space.multi_peak and space.work_grows and numeric, space.flat,
                   space.tolerance, _contradicts(probes, where, cliff), cal, over)

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


def _rising_at_edge(ok: dict[int, float], flat: float) -> bool:
    """The largest pass is the best or within two runs' noise of it: the peak may lie past
    it, so values whose compiled-memory line reads over the pool are worth a run (the line
    an estimate: one run says whether they fit). Else the runs fall from the best toward
    them, and they are left unrun (never said not to fit: `why_not_run`)."""
    if not ok:
        return True
    return ok[max(ok)] >= (1 - flat) * max(ok.values())


def _contradicts(probes: Sequence[Probe], where: dict[Value, int], cliff: int) -> bool:
    """The lowest failure is one of two or more OOMs the memory measured says fit."""
    hits = contradicting(probes)
    return len(hits) >= 2 and any(where.get(probes[k].value) == cliff for k in hits)


def _below_chords(x: tuple[float, ...], ok: dict[int, float], flat: float
                  ) -> dict[int, float]:
    """Each run measured below the chord through the runs either side of it by more than
    two runs' noise, and how far, as a share of the best. A concave curve lies on or above
    every chord; a run below one beyond the noise is a valley the secants would bound
    over, or the bend of a fall that flattens."""
    points = sorted(ok)
    top = max(ok.values(), default=0.0)
    if len(points) < 3 or top <= 0:
        return {}  # no chord, or nothing measured any throughput to take a share of
    below: dict[int, float] = {}
    for a, b, c in zip(points, points[1:], points[2:], strict=False):
        chord = ok[a] + (ok[c] - ok[a]) * (x[b] - x[a]) / (x[c] - x[a])
        if (chord - ok[b]) / top > flat:
            below[b] = (chord - ok[b]) / top
    return below


def tile_size(view: View) -> int | None:
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
            if (view.ok[b] - chord if on[k] else chord - view.ok[b]) > view.flat * top:
                return size
    return None


def _alignment(v: float) -> int:
    """How aligned a batch is: 3 for a multiple of 8, 2 of 4, 1 of 2, else 0."""
    n = int(v)
    if n != v or n <= 0:
        return 0
    return min(ALIGN_MAX, (n & -n).bit_length() - 1)
