"""The two-parameter search's step at one `XLA_PYTHON_CLIENT_MEM_FRACTION` value: which
batch that pool runs next, or why it needs none.

The fraction only sizes the pool XLA allocates from: the compiled program, and so its TGS
and its compiled-memory line at a batch, is the same at every fraction. A batch that passed
with a smaller pool passes with a larger one at the same TGS; one that failed with a larger
pool fails with a smaller one. So every run counts at every fraction it says something about
(the pool in its line scaled by the fraction), a larger fraction runs only the batches its
larger pool newly admits, and only while the TGS trend at the smaller pool's top could still
rise. A larger fraction whose smaller pool's top is flat within the noise runs its own
largest fit once: the curve may still rise there. (A pool above 0.95 may starve the
collectives and run slower, SKILL.md: carried runs are then optimistic at the larger pool,
which costs runs there but is measured before it is the verdict; a fraction below the
config's is fraction_below.py's.)
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
from sweepd.kinds.model_perf.two_param.pairs import Pair, PairStep


def fraction_step(space: SearchSpace, first: Value, s: Value, pairs: Sequence[Pair],
                  runs_left: int | None) -> PairStep | str:
    seen = carried(s, pairs, first)
    step = next_probe(space, seen, runs_left)
    mine = sum(1 for t, _ in pairs if t == s)
    if step is None and not mine and s != first:
        top = _flat_at_top(seen)
        if isinstance(top, PairStep):
            return replace(top, second=s)
    if step is None and s == first:   # no smaller pool's runs carry to the config's
        return f"settled with {mine} run{'s' * (mine != 1)}: its batch search converged"
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
    if (highest.tgs or 0.0) < (1 - FLAT) * (top.tgs or 0.0):
        return None
    likely = math.floor(fit.likely_fit())
    tried = {p.value for p in seen}
    if likely <= float(highest.value) or likely in tried:
        return None
    return PairStep("", likely, f"the largest pass at a smaller pool ({highest.value}) is "
                    f"within {FLAT:.0%} of the best there: the curve may still rise, "
                    f"and this pool fits up to ~{likely} ({fit.why})")


def carried(s: Value, pairs: Sequence[Pair], first: Value) -> list[Probe]:
    """Every run as it stands at fraction `s`: its own, a pass with a smaller or equal pool
    (it fits in more, at the same TGS), a failure with a larger or equal pool (it fails in
    less). The pool each printed is scaled to `s`. A pass below the config's pool
    (`fraction_below`: a read where the larger pool may starve the collectives) measured
    another speed and carries nowhere."""
    f, low = float(s), float(first)
    out = []
    for t, p in pairs:
        ft = float(t)
        ok = p.outcome is Outcome.OK
        if t == s or (ok and low <= ft <= f) or \
                (not ok and p.outcome is not Outcome.SLOW and ft >= f):
            limit = p.limit_gb * f / ft if p.limit_gb is not None else None
            out.append(replace(p, limit_gb=limit))
    return out
