"""What a later `remat_policy`'s runs say against the first policy's: its speed (its TGS
over the first policy's curve at the same batches), whether two readings of it are too far
apart for one speed to hold (its curve has its own shape), how far it fits, whether it
fits well past the first policy's runs (`fits_past`), and where its own peak likely is.

One speed holds at every batch only if the policy's curve has the first one's shape, and
keeping more activations may move its peak: before a bound dismisses a policy its speed is
read again at its own likely peak (the first policy's best batch scaled by the two largest
fits). Two readings more than PRIOR_SHAPE apart (scaled by the noise) mean its curve has
its own shape (red team t12, t13: a policy peaking at 14, read once at 24, was dismissed at
0.66x).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sweepd.kinds.model_perf.search import (
    NOISE,
    PRIOR_SHAPE,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    best_mean,
    memory_fit,
    upper_bound,
)
from sweepd.kinds.model_perf.thresholds import THRESHOLDS

# A policy that fits beyond the first policy's largest pass by more than this share of it
# is read at its own likely peak before the first policy's runs settle it (`fits_past`).
PAST_REF = THRESHOLDS.past_ref


def ref_best(ref_runs: Sequence[Probe]) -> Value | None:
    top = best_mean(ref_runs)
    return top.value if top is not None else None


def own_peak(space: SearchSpace, own: Sequence[Probe], ref_runs: Sequence[Probe],
             fit: float) -> int | None:
    """The batch to run this policy at next when its speed, read so far where its curve
    may differ, would settle it: the first policy's best batch scaled by the two largest
    fits (memory pressure sets where a curve turns), unless a run of its own is already
    within a tenth of it (or one batch). None: nothing to run there (no memory says it,
    or it ran, or it failed)."""
    first_best = ref_best(ref_runs)
    ref_fit = fits_up_to(ref_runs)
    if not isinstance(first_best, int) or not math.isfinite(fit) \
            or not math.isfinite(ref_fit) or ref_fit <= 0:
        return None
    target = first_best * fit / ref_fit
    ints = [v for v in space.candidates if isinstance(v, int) and v <= fit]
    if not ints:
        return None
    pick = min(ints, key=lambda v: abs(v - target))
    if any(p.value == pick for p in own) or any(
            p.outcome is Outcome.OK and abs(float(p.value) - pick) <= max(1.0, 0.1 * pick)
            for p in own):
        return None
    return pick


def shape_apart(space: SearchSpace, own: Sequence[Probe], ref_runs: Sequence[Probe]
                ) -> str | None:
    """This policy's speed against the first policy, read at two of its batches, differs
    by more than four runs' noise (PRIOR_SHAPE, scaled by the noise measured): its curve
    has its own shape, and one speed bounds nothing. Between the first policy's runs its
    curve is known only within the chord (below: a concave curve) and the secants' bound
    (above), so a reading's speed is a range; only ranges apart count. Only readings
    inside the first policy's runs count: outside them its curve is held flat."""
    reads = [(b, r) for b, r, ok in _ratios(own, ref_runs) if ok]
    if len(reads) < 2:
        return None
    tgs = {float(p.value): p.tgs or 0.0 for p in own if p.outcome is Outcome.OK}
    # The slowest this policy can be at b: its TGS over the most the first curve holds there.
    low = [(b, tgs[b] / top) for b, _ in reads
           if math.isfinite(top := upper_bound(space, ref_runs, b)) and top > 0]
    if not low:
        return None
    slow = max(low, key=lambda br: br[1])
    fast = min(reads, key=lambda br: br[1])
    allowed = PRIOR_SHAPE * max(1.0, space.noise / NOISE)
    if slow[1] <= fast[1] * (1 + allowed):
        return None
    return (f"its speed read at least {slow[1]:.3f}x at batch {slow[0]:g} and at most "
            f"{fast[1]:.3f}x at {fast[0]:g}, more than {allowed:.0%} (four runs' noise) "
            "apart: its curve has its own shape")


def fits_past(own: Sequence[Probe], ref_runs: Sequence[Probe], fit: float) -> int | None:
    """The first policy's largest pass, where this policy fits well beyond it (by more than
    PAST_REF of it) and has not run above it: this policy's batches up to its fit are read
    off the first policy's curve extended past where it fits. None otherwise."""
    top = ref_top(ref_runs)
    if top is None or not math.isfinite(fit) or fit <= top * (1 + PAST_REF):
        return None
    return None if ran_past(own, ref_runs) else top


def ref_top(ref_runs: Sequence[Probe]) -> int | None:
    """The first policy's largest pass."""
    return max((int(p.value) for p in ref_runs if p.outcome is Outcome.OK
                and isinstance(p.value, int)), default=None)


def ran_past(own: Sequence[Probe], ref_runs: Sequence[Probe]) -> bool:
    """This policy passed at a batch above the first policy's largest pass."""
    top = ref_top(ref_runs)
    return top is not None and any(p.outcome is Outcome.OK and float(p.value) > top
                                   for p in own)


def top_run(own: Sequence[Probe], fit: float) -> bool:
    """This policy has run at (or one below) the largest batch it may fit."""
    return any(p.outcome is Outcome.OK and float(p.value) >= math.floor(fit) - 1 for p in own)


def fits_up_to(own: Sequence[Probe]) -> float:
    """The largest batch this policy may fit: its memory line's prediction (one run's line
    through the origin errs high, which only widens the bound), below its lowest failure,
    at least its largest pass; inf when nothing says."""
    ok = [float(p.value) for p in own if p.outcome is Outcome.OK]
    fails = [float(p.value) - 1 for p in own if p.outcome is not Outcome.OK
             and float(p.value) > max(ok, default=0.0)]
    fit = memory_fit(own)
    limit = min([*fails, *([fit.max_fit()] if fit is not None else [])], default=math.inf)
    return max([limit, *ok])


def read_speed(own: Sequence[Probe], ref: Sequence[Probe]) -> tuple[float, bool] | None:
    """This policy's TGS over the first policy's at the same batches (the first's curve
    read between its runs where this one ran between them), None before a pass inside
    the first policy's runs: outside them, its curve is extrapolated, and a speed read off
    an extrapolation would settle the policy on a guess."""
    reads = _ratios(own, ref)
    if not reads:
        return None
    return max(r for _, r, _ in reads), all(ok for _, _, ok in reads)


def _ratios(own: Sequence[Probe], ref: Sequence[Probe]) -> list[tuple[float, float, bool]]:
    """(batch, this policy's TGS over the first policy's there, read inside its runs) for
    each pass of this policy; outside the first policy's runs its nearest run stands in."""
    pts = sorted((float(p.value), p.tgs) for p in ref if p.outcome is Outcome.OK and p.tgs)
    out = []
    for p in own:
        if p.outcome is not Outcome.OK or not p.tgs or not pts:
            continue
        b = float(p.value)
        below = [q for q in pts if q[0] <= b]
        above = [q for q in pts if q[0] >= b]
        if below and above:
            (x0, y0), (x1, y1) = below[-1], above[0]
            # A chord under a concave curve reads it low: the ratio errs high, the bound wide.
            g = y0 if x1 == x0 else y0 + (y1 - y0) * (b - x0) / (x1 - x0)
            out.append((b, p.tgs / g, True))
        else:
            out.append((b, p.tgs / (below or above)[-1 if below else 0][1], False))
    return out
