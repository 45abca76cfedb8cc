"""The two-parameter search's step at an `XLA_PYTHON_CLIENT_MEM_FRACTION` below the
config's: whether a smaller pool is read, at which batch, or why it is not run.

A smaller pool runs the same compiled program with fewer batches fitting, so where the
speed is the pool's alone it cannot be faster (fraction_step.py). But batch-sweep.SKILL.md:
a higher fraction "gives more memory but may starve RCCL" (the collectives' buffers live
outside XLA's pool), and "XLA may inflate allocations" to fill it. A pool above
STARVES_ABOVE therefore vouches for no smaller pool's speed (red team t05b: the config at
0.97, slowed 3 %, and 0.93 dismissed as "cannot be faster" unread). The highest smaller
fraction runs the best batch so far once (or, when its pool cannot hold that batch, the
largest it fits). That run reads its speed against the larger pool's runs; those runs,
scaled by it, stand in for the batches not run here (their memory lines dropped: XLA
fills a larger pool, so they overstate this one's), and this pool's own compiled-memory
line bounds its batches. Where the larger pool's curve was still rising at its largest
fit, this pool may fit more (inflation) and its search goes on up there. A fraction at or
under STARVES_ABOVE that ran vouches for the pools below it, which are not run: taken as
no faster, an assumption the verdict states as one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from sweepd.kinds.model_perf.search import (
    FLAT,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    best,
    memory_fit,
    next_probe,
)
from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.kinds.model_perf.two_param.pairs import Pair, PairStep, best_pair

# Above this fraction of the GPU's memory in XLA's pool, the collectives may be starved:
# on a 192 GB GPU less than ~10 GB is left outside the pool for RCCL/NCCL's buffers, the
# runtime and the compiler's scratch (SKILL.md's own example runs at .93).
STARVES_ABOVE = THRESHOLDS.starves_above


def below_step(space: SearchSpace, first: Value, s: Value, values: Sequence[Value],
               pairs: Sequence[Pair], runs_left: int | None) -> PairStep | str:
    """The step at fraction `s`, smaller than the config's `first`."""
    f = float(s)
    own = [p for t, p in pairs if t == s]
    ran = {t for t, _ in pairs}
    vouch = min((v for v in values if float(v) > f and v in ran), key=float, default=first)
    if not own and float(vouch) <= STARVES_ABOVE:
        return (f"not run: a smaller pool than {vouch} runs the same compiled program with "
                f"fewer batches fitting, and a pool at or under {STARVES_ABOVE} leaves the "
                "collectives their room, so it is taken as no faster (assumed, not measured)")
    top = best_pair(pairs)
    if top is None:
        return (f"not run: no batch passed at a larger pool, and {s} holds less" if not own
                else _failed(own))
    fit = _largest_fit(s, own, pairs)
    if not any(p.outcome is Outcome.OK for p in own):
        return _read(s, vouch, top, own, fit)
    ref = [p for t, p in pairs if t == vouch and p.outcome is Outcome.OK and p.tgs]
    speed = _speed(own, ref)
    tried = {p.value for p in own}
    stand = [] if speed is None else [
        replace(p, tgs=(p.tgs or 0.0) * speed[0], temp_gb=None, fixed_gb=None, limit_gb=None,
                alloc_gb=None, earlier=True)
        for p in ref if p.value not in tried and (fit is None or float(p.value) <= fit[0])]
    top_here = best([*own, *stand])
    if top_here is not None and top_here.earlier:
        # The verdict is the runs' own: a batch the stand-ins put first is measured here.
        return PairStep(s, top_here.value, f"the runs at {vouch}, scaled by the speed read at "
                        f"this pool, are highest at {top_here.value}: measure it here")
    step = next_probe(replace(space, prior=(), prior_drift=None, start=None),
                      [*own, *stand], runs_left)
    if step is not None:
        return PairStep(s, step.value, step.why + (
            f" (the runs at {vouch}, scaled by the speed read at this pool, stand in for the "
            "batches not run here)" if stand else " (this pool's own batch search)"))
    return _settled(own, vouch, speed, bool(stand))


def _read(s: Value, vouch: Value, top: Pair, own: list[Probe],
          fit: tuple[int, float] | None) -> PairStep | str:
    """The first run: the best batch so far where this pool holds it (by the memory line,
    up to the pool itself: the margin is for aiming, and a run at the edge tells), else its
    largest fit with the margin. After an OOM there, once more at what its own
    compiled-memory line predicts."""
    batch = top[1].value
    tried = {p.value for p in own}
    starved = (f"{vouch} is above {STARVES_ABOVE}, where a pool may starve the collectives "
               "(SKILL.md), so its runs do not vouch for a smaller pool's speed")
    if fit is None or float(batch) <= fit[1]:
        if batch not in tried:
            return PairStep(s, batch, f"the best batch so far ({batch}, at {top[0]}), run "
                            f"once at this smaller pool: {starved}")
    elif fit[0] >= 1 and fit[0] not in tried:
        return PairStep(s, fit[0], f"the largest batch this pool fits (~{fit[0]}; the best "
                        f"so far, {batch} at {top[0]}, does not), run once: {starved}")
    return _failed(own)


def _speed(own: Sequence[Probe], ref: Sequence[Probe]) -> tuple[float, str] | None:
    """This pool's TGS over the larger pool's at a batch both read (or, where the larger
    pool did not run it, over the chord of its runs either side), and where it was read."""
    ratios, where = [], []
    for p in own:
        if p.outcome is not Outcome.OK or not p.tgs:
            continue
        there = _ref_at(float(p.value), ref)
        if there:
            ratios.append(p.tgs / there)
            where.append(str(p.value))
    if not ratios:
        return None
    return sum(ratios) / len(ratios), " and ".join(where)


def _ref_at(b: float, ref: Sequence[Probe]) -> float | None:
    same = [p.tgs or 0.0 for p in ref if float(p.value) == b]
    if same:
        return sum(same) / len(same)
    lo = max((p for p in ref if float(p.value) < b), key=lambda p: float(p.value), default=None)
    hi = min((p for p in ref if float(p.value) > b), key=lambda p: float(p.value), default=None)
    if lo is None or hi is None:
        return None
    x0, x1, y0, y1 = float(lo.value), float(hi.value), lo.tgs or 0.0, hi.tgs or 0.0
    return y0 + (y1 - y0) * (b - x0) / (x1 - x0)


def _settled(own: list[Probe], vouch: Value, speed: tuple[float, str] | None,
             stood: bool) -> str:
    runs = f"{len(own)} run" if len(own) == 1 else f"{len(own)} runs"
    if speed is None:
        return (f"settled with {runs}: no batch {vouch} ran reads its speed here, so its own "
                "batch search ran and converged")
    ratio, where = speed
    faster = (", faster beyond two runs' noise: the larger pool was slowed (the "
              "collectives starved, SKILL.md)") if ratio > 1 + FLAT else ""
    rest = (f"{vouch}'s runs, scaled to that speed, stand in for the batches not run here "
            "and leave none this pool fits that could be faster" if stood else
            "no other batch this pool fits could be faster")
    return f"settled with {runs}: read at {where}, {ratio:.3f}x the TGS of {vouch}{faster}; {rest}"


def _failed(own: list[Probe]) -> str:
    where = ", ".join(f"{p.value} ({p.outcome})" for p in own)
    return f"read and did not pass at {where}: a smaller pool fits less still"


def _largest_fit(s: Value, own: list[Probe], pairs: Sequence[Pair]
                 ) -> tuple[int, float] | None:
    """The largest batch predicted to fit this pool with the margin, and where the line
    meets the pool itself: by its own compiled-memory line once it has one, else by the
    larger pools' lines scaled to it (an overstatement where XLA inflated them to fill a
    larger pool). None: no line."""
    f = float(s)
    lines = own if any(p.temp_gb is not None for p in own) else [
        replace(p, limit_gb=p.limit_gb * f / float(t) if p.limit_gb is not None else None)
        for t, p in pairs if float(t) > f]
    fit = memory_fit(lines)
    if fit is None or fit.slope <= 0:
        return None
    likely = fit.likely_fit()
    return (math.floor(likely), fit.max_fit()) if math.isfinite(likely) else None
