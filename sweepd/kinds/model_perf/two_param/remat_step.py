"""The two-parameter search's step at one `remat_policy` value: which batch that policy
runs next, or why it needs none.

A policy changes both what a step recomputes (its speed) and what it keeps (the temp
slope): neither is known before a run. A later policy starts at the best batch so far; that
one run measures its speed ratio and its own compiled-memory line, and the first policy's
runs, their TGS scaled by that ratio and their memory lines dropped, stand in for the
batches it has not run (SearchSpace.prior). After an OOM there, the first policy's fastest
batch its memory line predicts to fit is next. A policy whose bound (its speed x what the
first policy's curve can hold up to its own largest fit) cannot beat the best of every
setting by more than TOLERANCE stops there; a speed read outside the first policy's runs
settles it only once its own largest fit has run, and before the bound dismisses a policy
its speed is read again at its own likely peak. A policy whose readings are too far apart
for one speed (remat_speed.py) gets its own batch search, no other policy's runs standing
in. A policy that fits well past the first policy's largest run is not settled by that
policy's trend extended past where it ran: it is read at its own likely peak first, and
from then on its own runs bound it there (or, where its peak cannot be placed, the note
says the batches past the first policy's runs were assumed, not measured).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from sweepd.kinds.model_perf.search import (
    TOLERANCE,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    best,
    next_probe,
    upper_bound,
)
from sweepd.kinds.model_perf.search.prior import scaled_prior
from sweepd.kinds.model_perf.two_param.pairs import Pair, PairStep, best_pair
from sweepd.kinds.model_perf.two_param.remat_speed import (
    fits_past,
    fits_up_to,
    own_peak,
    ran_past,
    read_speed,
    ref_best,
    ref_top,
    shape_apart,
    top_run,
)


def remat_step(space: SearchSpace, parameter: str, first: Value, s: Value,
               own: list[Probe], pairs: Sequence[Pair], runs_left: int | None
               ) -> PairStep | str:
    if s == first:
        step = next_probe(space, own, runs_left)
        return PairStep(s, step.value, step.why) if step else \
            f"settled with {_runs(own)}: its batch search converged"
    ref_runs = [p for t, p in pairs if t == first]
    fit = fits_up_to(own)
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
    speed = read_speed(own, ref_runs)
    ratio = speed[0] if speed is not None else None
    # A speed read off the first policy's nearest run (this policy fits only below its
    # runs) settles nothing until this policy's own largest fit has run: its top is where
    # its curve and the stand-in part most.
    guessed = speed is not None and not speed[1] and not top_run(own, fit)
    apart = shape_apart(space, own, ref_runs)
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
            peak = own_peak(space, own, ref_runs, fit)
            if peak is not None:
                return PairStep(s, peak, f"{parameter}={first}'s best batch "
                                f"({ref_best(ref_runs)}) scaled by what this policy fits "
                                f"(~{fit:.0f} of ~{fits_up_to(ref_runs):.0f}): where memory "
                                "pressure would put its own peak; one run there tests whether "
                                f"its speed of {ratio:.3f}x holds at every batch before it "
                                "bounds the policy (SKILL.md's 'fix one, sweep the other' "
                                "would judge it by its run at the best batch alone)")
            where = sorted({str(p.value) for p in own if p.outcome is Outcome.OK and p.tgs})
            return (f"settled with {_runs(own)}: at {ratio:.3f}x "
                    f"the speed of {parameter}={first}"
                    + (f" (read at {' and '.join(where)}, its own likely peak, alike)"
                       if len(where) > 1 else "")
                    + f" and fitting up to ~{fit:.0f}, it "
                    f"reaches at most {bound:,.0f} TGS, not more than {TOLERANCE:.1%} over "
                    f"the best ({top[1].tgs:,.0f} at {parameter}={top[0]}, batch "
                    f"{top[1].value})" + _assumed(parameter, first, own, ref_runs, fit))
    bounded = _bound_past(space_s, parameter, first, own, ref_runs, fit, top)
    if bounded is not None:
        return bounded
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
        # Where the first policy's runs stood in, no batch search of this policy's own
        # ran: said so (red team t02 read "its batch search converged" after one run).
        if not scaled_prior(space_s, own):
            return f"settled with {_runs(own)}: its batch search converged"
        past = fits_past(own, ref_runs, fit)
        if past is not None:
            # The first policy's curve ends where it stops fitting: past it, its trend
            # extended is no reading of this policy's (red team u03b: full, read once at 8,
            # fits 40 of minimal_flash's 12 and peaks at 30, 4 % faster than the best).
            peak = own_peak(space, own, ref_runs, fit)
            if peak is not None:
                return PairStep(s, peak, f"{parameter}={first}'s runs stand in only up to "
                                f"{past}, and this policy fits up to ~{fit:.0f}: one run at "
                                f"{peak}, where memory pressure would put its own peak "
                                f"({parameter}={first}'s best batch, {ref_best(ref_runs)}, "
                                "scaled by the two largest fits), reads it there before "
                                "the trend settles it")
        return (f"settled with {_runs(own)}: {parameter}={first}'s runs, scaled to this "
                "policy's speed where both ran, stood in for the batches it did not run, and "
                "the trend leaves none that could be faster"
                + _assumed(parameter, first, own, ref_runs, fit))
    return PairStep(s, step.value, step.why)


def _bound_past(space_s: SearchSpace, parameter: str, first: Value, own: Sequence[Probe],
                ref_runs: Sequence[Probe], fit: float, top: Pair | None) -> str | None:
    """Read past the first policy's runs (`fits_past`): there its own runs bound the policy,
    the first policy's, scaled, only where they stand in. Its own batch search would climb
    toward its own best, which need not be the best of every setting. Why it is settled,
    or None."""
    if top is None or not ran_past(own, ref_runs):
        return None
    reach = upper_bound(space_s, own, fit)
    if reach > (top[1].tgs or 0.0) * (1 + TOLERANCE):
        return None
    return (f"settled with {_runs(own)}: its own runs past {parameter}={first}'s (largest "
            f"{ref_top(ref_runs)}), with {parameter}={first}'s scaled to its speed below, "
            f"allow at most {reach:,.0f} TGS up to its largest fit (~{fit:.0f}), not more "
            f"than {TOLERANCE:.1%} over the best ({top[1].tgs:,.0f} at {parameter}="
            f"{top[0]}, batch {top[1].value})")


def _assumed(parameter: str, first: Value, own: Sequence[Probe], ref_runs: Sequence[Probe],
             fit: float) -> str:
    """Said where the policy was settled with its batches past the first policy's runs
    read off that policy's curve extended (`fits_past`) rather than run."""
    past = fits_past(own, ref_runs, fit)
    return "" if past is None else (
        f"; above {past}, the largest batch {parameter}={first} ran, that is its curve "
        f"extended, and this policy may fit up to ~{fit:.0f}: assumed, not measured")


def _runs(own: Sequence[Probe]) -> str:
    return f"{len(own)} run" if len(own) == 1 else f"{len(own)} runs"


def _own_search(space: SearchSpace, s: Value, own: list[Probe], runs_left: int | None,
                apart: str) -> PairStep | str:
    """The policy's own batch search: no other policy's runs stand in (SKILL.md Step 7,
    the batch with the highest TGS, searched at this setting as at the first)."""
    step = next_probe(replace(space, prior=(), prior_drift=None, start=None), own, runs_left)
    if step is None:
        return (f"settled with {_runs(own)}: {apart}, so its own batch search ran "
                "(no other policy's runs standing in) and converged")
    return PairStep(s, step.value, f"{step.why} ({apart}: its own batch search, SKILL.md "
                    "Steps 3-7 at this setting, no other policy's runs standing in)")
