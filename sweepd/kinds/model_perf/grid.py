"""Two-parameter model perf search: the batch size with a second knob that leaves the
training itself unchanged (batch-sweep.SKILL.md "batch x mem_fraction: fix one and sweep
the other, document which combination won").

The second knob moves the largest batch that fits, so the two are searched together, one
memory-aware batch search (the search package) per value of the second knob, each starting from what
the others taught:

* `XLA_PYTHON_CLIENT_MEM_FRACTION` only sizes the pool XLA allocates from: the compiled
  program, and so its TGS and its compiled-memory line at a batch, is the same at every
  fraction. A batch that passed with a smaller pool passes with a larger one at the same
  TGS; one that failed with a larger pool fails with a smaller one. So every run counts at
  every fraction it says something about (the pool in its line scaled by the fraction), a
  larger fraction runs only the batches its larger pool newly admits, and only while the
  TGS trend at the smaller pool's top could still rise; a smaller fraction than one
  searched can admit no batch the larger did not, and is never run.
* `remat_policy` changes both what a step recomputes (its speed) and what it keeps (the
  temp slope): neither is known before a run. A later policy starts at the best batch so
  far; that one run measures its speed ratio and its own compiled-memory line, and the
  first policy's runs, their TGS scaled by that ratio and their memory lines dropped, stand
  in for the batches it has not run (SearchSpace.prior). After an OOM there, the first
  policy's fastest batch its memory line predicts to fit is next. A policy whose bound
  (its speed x what the first policy's curve can hold up to its own largest fit) cannot
  beat the best of every setting by more than TOLERANCE stops there; a speed read outside
  the first policy's runs settles it only once its own largest fit has run. One speed
  holds at every batch only if the policy's curve has the first one's shape, and keeping
  more activations may move its peak: before the bound dismisses a policy its speed is
  read again at its own likely peak (the first policy's best batch scaled by the two
  largest fits). Two readings more than PRIOR_SHAPE apart (scaled by the noise) mean its
  curve has its own shape: it gets its own batch search, no other policy's runs standing
  in (red team t12, t13: a policy peaking at 14, read once at 24, was dismissed at 0.66x).
* A larger fraction whose smaller pool's top is flat within the noise runs its own
  largest fit once: the curve may still rise there.

`max_target_length` and `quantization` change what is trained: they stay one-parameter
sweeps (spec.py refuses them here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweepd.kinds.model_perf.params import ENV_PREFIX
from sweepd.kinds.model_perf.search import (
    MEMORY_MARGIN,
    NOISE,
    PRIOR_SHAPE,
    TOLERANCE,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    best,
    best_mean,
    memory_fit,
    next_probe,
    upper_bound,
)

FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
REMAT = "remat_policy"
SECOND = (f"{ENV_PREFIX}{FRACTION}", REMAT)  # the knobs a two-parameter sweep takes
# Knobs that change what is trained, with the one line that refuses them.
ONE_PARAMETER = ("max_target_length", "quantization")

Pair = tuple[Value, Probe]  # (the second knob's value, the run at a batch)


@dataclass(frozen=True)
class PairStep:
    second: Value
    value: Value
    why: str


def is_fraction(parameter: str) -> bool:
    return parameter.removeprefix(ENV_PREFIX) == FRACTION


def best_pair(pairs: Sequence[Pair]) -> Pair | None:
    """The (setting, value) whose runs have the highest mean TGS over every setting (a
    value is run again only where the noise exceeds the rules': `search.repeat`), as its
    latest run with that mean; the earliest on a tie."""
    by: dict[Value, list[Probe]] = {}
    for s, p in pairs:
        by.setdefault(s, []).append(p)
    tops = [(s, top) for s, ps in by.items() if (top := best_mean(ps)) is not None]
    return max(tops, key=lambda st: st[1].tgs or 0.0, default=None)


def next_pair(space: SearchSpace, parameter: str, values: Sequence[Value],
              pairs: Sequence[Pair], runs_left: int | None = None) -> PairStep | None:
    """The next (second value, batch) to run and why, or None when every setting is
    settled. `space` is the batch space of the first value (the config's setting)."""
    for _, state in _settings(space, parameter, values, pairs, runs_left):
        if isinstance(state, PairStep):
            return state
    return None


def settled_notes(space: SearchSpace, parameter: str, values: Sequence[Value],
                  pairs: Sequence[Pair]) -> dict[Value, str]:
    """For each setting the search is done with: why (shown in the verdict)."""
    return {s: why for s, why in _settings(space, parameter, values, pairs, None, every=True)
            if isinstance(why, str)}


def _settings(space: SearchSpace, parameter: str, values: Sequence[Value],
              pairs: Sequence[Pair], runs_left: int | None, every: bool = False
              ) -> list[tuple[Value, PairStep | str]]:
    """Each setting in search order with its next step, or why it needs none. Stops at
    the first step unless `every`."""
    out: list[tuple[Value, PairStep | str]] = []
    first = values[0]
    order = _order(parameter, values)
    for s in order:
        if is_fraction(parameter) and float(s) < float(first):
            out.append((s, f"not run: a smaller pool than {first} runs the same compiled "
                           "program with fewer batches fitting, so it cannot be faster"))
            continue
        own = [p for t, p in pairs if t == s]
        if is_fraction(parameter):
            state = _fraction_step(space, first, s, pairs, runs_left)
        else:
            state = _remat_step(space, parameter, first, s, own, pairs, runs_left)
        out.append((s, state))
        if isinstance(state, PairStep) and not every:
            break
    return out


def _order(parameter: str, values: Sequence[Value]) -> list[Value]:
    """The config's value first; larger fractions upward (each admits more batches)."""
    if not is_fraction(parameter):
        return list(values)
    rest = sorted(values[1:], key=lambda v: float(v))
    return [values[0], *rest]


def _fraction_step(space: SearchSpace, first: Value, s: Value, pairs: Sequence[Pair],
                   runs_left: int | None) -> PairStep | str:
    seen = carried(s, pairs)
    step = next_probe(space, seen, runs_left)
    mine = sum(1 for t, _ in pairs if t == s)
    if step is None and not mine and s != first:
        top = _flat_at_top(seen)
        if isinstance(top, PairStep):
            return replace(top, second=s)
    if step is None:
        return (f"settled with {mine} run{'s' * (mine != 1)} of its own: the runs at "
                "smaller pools (the same program) and the TGS trend leave no batch its "
                "pool admits that could be faster")
    return PairStep(s, step.value, step.why if s == first else
                    f"{step.why} (the runs at smaller pools count here: the same program)")


def _flat_at_top(seen: Sequence[Probe]) -> PairStep | str | None:
    """The smaller pool's largest pass is within the noise of its best: the trend there
    cannot say the curve has stopped rising, and this pool admits more. One run at the
    largest batch its memory line says fits tells (None: nothing to run)."""
    ok = [p for p in seen if p.outcome is Outcome.OK and p.tgs]
    top = best(ok)
    fit = memory_fit(seen)
    if top is None or fit is None or fit.slope <= 0:
        return None
    highest = max(ok, key=lambda p: float(p.value))
    if (highest.tgs or 0.0) < (1 - 2 * NOISE) * (top.tgs or 0.0):
        return None
    likely = math.floor((fit.limit * (1 - MEMORY_MARGIN) - fit.base) / fit.slope)
    tried = {p.value for p in seen}
    if likely <= float(highest.value) or likely in tried:
        return None
    return PairStep("", likely, f"the largest pass at a smaller pool ({highest.value}) is "
                    f"within {2 * NOISE:.0%} of the best there: the curve may still rise, "
                    f"and this pool fits up to ~{likely} ({fit.why})")


def carried(s: Value, pairs: Sequence[Pair]) -> list[Probe]:
    """Every run as it stands at fraction `s`: its own, a pass with a smaller or equal pool
    (it fits in more, at the same TGS), a failure with a larger or equal pool (it fails in
    less). The pool each printed is scaled to `s`."""
    f = float(s)
    out = []
    for t, p in pairs:
        ft = float(t)
        ok = p.outcome is Outcome.OK
        if t == s or (ok and ft <= f) or (not ok and p.outcome is not Outcome.SLOW and ft >= f):
            limit = p.limit_gb * f / ft if p.limit_gb is not None else None
            out.append(replace(p, limit_gb=limit))
    return out


def _remat_step(space: SearchSpace, parameter: str, first: Value, s: Value,
                own: list[Probe], pairs: Sequence[Pair], runs_left: int | None
                ) -> PairStep | str:
    if s == first:
        step = next_probe(space, own, runs_left)
        return PairStep(s, step.value, step.why) if step else \
            f"settled with {len(own)} runs: its batch search converged"
    ref_runs = [p for t, p in pairs if t == first]
    fit = _fits_up_to(own)
    # The first policy's passes stand in for batches not run here, where this policy's
    # memory line says they may fit; their memory lines are the other policy's.
    ref = [replace(p, temp_gb=None, fixed_gb=None, limit_gb=None, alloc_gb=None)
           for p in ref_runs if float(p.value) <= fit]
    top = best_pair(pairs)
    start = top[1].value if top is not None else None
    # Another policy's curve at its own speed: the ratio measures that speed (prior_drift).
    space_s = replace(space, prior=tuple(ref), prior_drift=None, start=start,
                      start_why=f"the best batch so far ({start}, at {parameter}="
                                f"{top[0] if top else first}): one run there measures this "
                                "policy's speed against it and its own memory line")
    speed = _speed(own, ref_runs)
    ratio = speed[0] if speed is not None else None
    # A speed read off the first policy's nearest run (this policy fits only below its
    # runs) settles nothing until this policy's own largest fit has run: its top is where
    # its curve and the stand-in part most.
    guessed = speed is not None and not speed[1] and not _top_run(own, fit)
    apart = _shape_apart(space, own, ref_runs)
    if apart is not None:
        return _own_search(space, s, own, runs_left, apart)
    if top is not None and ratio is not None and not guessed:
        # TGS(policy, batch) ~ its speed x the first policy's curve: what that curve can
        # still hold up to this policy's largest fit bounds what this policy can reach.
        bound = ratio * upper_bound(space, ref_runs, fit)
        if bound <= (top[1].tgs or 0.0) * (1 + TOLERANCE):
            # One speed holds at every batch only if the policy's curve has the first one's
            # shape; keeping more (or less) activations may move its peak with its memory. So
            # the speed is read again where its own memory puts its peak before it bounds.
            peak = _own_peak(space, own, ref_runs, fit)
            if peak is not None:
                return PairStep(s, peak, f"{parameter}={first}'s best batch "
                                f"({_ref_best(ref_runs)}) scaled by what this policy fits "
                                f"(~{fit:.0f} of ~{_fits_up_to(ref_runs):.0f}): where memory "
                                "pressure would put its own peak; one run there tests whether "
                                f"its speed of {ratio:.3f}x holds at every batch before it "
                                "bounds the policy (SKILL.md's 'fix one, sweep the other' "
                                "would judge it by its run at the best batch alone)")
            where = sorted({str(p.value) for p in own if p.outcome is Outcome.OK and p.tgs})
            return (f"settled with {len(own)} run{'s' * (len(own) != 1)}: at {ratio:.3f}x "
                    f"the speed of {parameter}={first}"
                    + (f" (read at {' and '.join(where)}, its own likely peak, alike)"
                       if len(where) > 1 else "")
                    + f" and fitting up to ~{fit:.0f}, it "
                    f"reaches at most {bound:,.0f} TGS, not more than {TOLERANCE:.1%} over "
                    f"the best ({top[1].tgs:,.0f} at {parameter}={top[0]}, batch "
                    f"{top[1].value})")
    if own and ratio is None and math.isfinite(fit):
        # No pass yet: the first policy's fastest batch that this one's memory line
        # predicts to fit measures its speed where it matters most.
        tried = {p.value for p in own}
        ok = [p for p in ref_runs if p.outcome is Outcome.OK and p.value not in tried
              and float(p.value) <= fit]
        pick = best(ok)
        if pick is not None:
            return PairStep(s, pick.value, f"{parameter}={first}'s fastest batch that this "
                            f"policy's compiled-memory line predicts to fit (~{fit:.0f}): "
                            "it measures this policy's speed against it")
    step = next_probe(space_s, own, runs_left)
    if step is None:
        return f"settled with {len(own)} runs: its batch search converged"
    return PairStep(s, step.value, step.why)


def _ref_best(ref_runs: Sequence[Probe]) -> Value | None:
    top = best_mean(ref_runs)
    return top.value if top is not None else None


def _own_peak(space: SearchSpace, own: Sequence[Probe], ref_runs: Sequence[Probe],
              fit: float) -> int | None:
    """The batch to run this policy at next when its speed, read so far where its curve
    may differ, would settle it: the first policy's best batch scaled by the two largest
    fits (memory pressure sets where a curve turns), unless a run of its own is already
    within a tenth of it (or one batch). None: nothing to run there (no memory says it,
    or it ran, or it failed)."""
    ref_best = _ref_best(ref_runs)
    ref_fit = _fits_up_to(ref_runs)
    if not isinstance(ref_best, int) or not math.isfinite(fit) or not math.isfinite(ref_fit) \
            or ref_fit <= 0:
        return None
    target = ref_best * fit / ref_fit
    ints = [v for v in space.candidates if isinstance(v, int) and v <= fit]
    if not ints:
        return None
    pick = min(ints, key=lambda v: abs(v - target))
    if any(p.value == pick for p in own) or any(
            p.outcome is Outcome.OK and abs(float(p.value) - pick) <= max(1.0, 0.1 * pick)
            for p in own):
        return None
    return pick


def _shape_apart(space: SearchSpace, own: Sequence[Probe], ref_runs: Sequence[Probe]
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


def _own_search(space: SearchSpace, s: Value, own: list[Probe], runs_left: int | None,
                apart: str) -> PairStep | str:
    """The policy's own batch search: no other policy's runs stand in (SKILL.md Step 7,
    the batch with the highest TGS, searched at this setting as at the first)."""
    step = next_probe(replace(space, prior=(), prior_drift=None, start=None), own, runs_left)
    if step is None:
        return (f"settled with {len(own)} runs: {apart}, so its own batch search ran "
                "(no other policy's runs standing in) and converged")
    return PairStep(s, step.value, f"{step.why} ({apart}: its own batch search, SKILL.md "
                    "Steps 3-7 at this setting, no other policy's runs standing in)")


def _top_run(own: Sequence[Probe], fit: float) -> bool:
    """This policy has run at (or one below) the largest batch it may fit."""
    return any(p.outcome is Outcome.OK and float(p.value) >= math.floor(fit) - 1 for p in own)


def _fits_up_to(own: Sequence[Probe]) -> float:
    """The largest batch this policy may fit: its memory line's prediction (one run's line
    through the origin errs high, which only widens the bound), below its lowest failure,
    at least its largest pass; inf when nothing says."""
    ok = [float(p.value) for p in own if p.outcome is Outcome.OK]
    fails = [float(p.value) - 1 for p in own if p.outcome is not Outcome.OK
             and float(p.value) > max(ok, default=0.0)]
    fit = memory_fit(own)
    limit = min([*fails, *([fit.max_fit()] if fit is not None else [])], default=math.inf)
    return max([limit, *ok])


def _speed(own: Sequence[Probe], ref: Sequence[Probe]) -> tuple[float, bool] | None:
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
