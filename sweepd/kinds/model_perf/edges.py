"""Where the best of a model perf search sits against what was searched or given: at
the highest value, at the lowest of a range cut above 1, below a given value that failed,
or below a batch the compiled-memory line ruled out, or beside batches the given values
left out. Each is said in the verdict: a faster value may lie past it."""

from __future__ import annotations

from sweepd.kinds.model_perf.search import (
    MEMORY_MARGIN,
    Outcome,
    Probe,
    SearchSpace,
    best_mean,
    flat_rivals,
    memory_fit,
)
from sweepd.kinds.model_perf.search.prior import scaled_prior
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec


def best_at_edge(spec: ModelPerfSpec, space: SearchSpace, seen: list[Probe]) -> str | None:
    """The best is the highest value there was to try (the curve may still be rising), or
    the lowest of a range cut above 1 (`lower`: it may still be falling below it)."""
    top = best_mean(seen)
    if top is None or not space.ordered:
        return None
    if top.value == space.candidates[-1]:
        return "it is the highest value searched, so a higher one may be faster"
    if top.value == space.candidates[0] and spec.values is None and spec.lower > 1:
        return f"it is the lowest value searched (lower: {spec.lower}), so a lower one " \
               "may be faster"
    return _given_gap_above(spec, space, seen, top) or _memory_edge(spec, space, seen, top)


def _memory_edge(spec: ModelPerfSpec, space: SearchSpace, seen: list[Probe], top: Probe
                 ) -> str | None:
    """The largest batch that ran is the best, or measured within the noise of it (a flat
    top still rising there), and the next was never run: the compiled-memory line ruled it
    out (no run of it failed), which is a prediction, not a run. The line the search read:
    with an earlier sweep's runs where they stood in (red team p11: its lines capped the
    search at 38, this sweep's alone say 39 fits, and the note was missing)."""
    if spec.parameter != BATCH or spec.values is not None or not isinstance(top.value, int):
        return None
    edge = max(p.value for p in seen if isinstance(p.value, int) and p.outcome is Outcome.OK)
    if any(isinstance(p.value, int) and p.value > edge for p in seen):
        return None
    if edge != top.value and edge not in flat_rivals(space, seen):
        return None
    fit = memory_fit([*seen, *scaled_prior(space, seen)])
    if fit is None:
        return None
    need = fit.base + fit.slope * (edge + 1)
    if need <= fit.limit * (1 - MEMORY_MARGIN):
        return None   # memory did not rule it out: something else did, and says so
    rival = "" if edge == top.value else " (measured within the noise of the best)"
    return (f"nothing above {edge}{rival} was run: the compiled memory predicts "
            f"{edge + 1} needs ~{need:.0f} of the {fit.limit:.0f} GB pool")


def _given_gap_above(spec: ModelPerfSpec, space: SearchSpace, seen: list[Probe],
                     top: Probe) -> str | None:
    """Given integer values: the best is the last that ran and the next given value failed
    with batches between them never given. A larger batch that fits may be faster."""
    if spec.values is None or spec.parameter != BATCH or not isinstance(top.value, int):
        return None
    i = space.candidates.index(top.value)
    nxt = space.candidates[i + 1]
    failed = [p for p in seen if p.value == nxt and p.outcome is not Outcome.OK]
    if not failed or not isinstance(nxt, int) or nxt - top.value < 2:
        return None
    return (f"the next value given, {nxt}, failed ({failed[0].outcome}); {top.value + 1}-"
            f"{nxt - 1} were not among the values, so a batch there may fit and be faster")


def ungiven_beside_best(spec: ModelPerfSpec, space: SearchSpace, seen: list[Probe]) -> str | None:
    """Given integer batch values: the batches between the best and the given values either
    side of it were never given, so the peak may lie there (values [8, 16, 32, 40] measured 16
    best; the curve peaked at 22, 17 % faster, and the verdict said nothing of it). Only
    batches no value given names: read between the given values, not the values that ran (a
    given 20 not run lay in "17-23 … were not among the values given" beside a best of 24)."""
    top = best_mean(seen)
    if spec.values is None or spec.parameter != BATCH or top is None \
            or not isinstance(top.value, int):
        return None
    given = sorted({int(v) for v in spec.values if isinstance(v, int)} | {top.value})
    i = given.index(top.value)
    spans = [f"{a + 1}-{b - 1}" if b - a > 2 else str(a + 1)
             for a, b in ((given[i - 1], top.value) if i else (0, 0),
                          (top.value, given[i + 1]) if i + 1 < len(given) else (0, 0))
             if b - a >= 2]
    if not spans:
        return None
    return (f"batches {' and '.join(spans)}, beside the best, were not among the values "
            "given: the peak may lie there")
