"""What a model perf sweep says before its first job (in its first probe's reason, so in
`validate`'s first plan and the sweep's first decision): the values an earlier sweep's runs
stand in for, and that the search does not run a value its runs show cannot win. Said up
front, not only in the verdict: a person who listed four values and saw two run would
otherwise think the others were lost."""

from __future__ import annotations

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.pool import pool_of
from sweepd.kinds.model_perf.search import SearchSpace
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec


def upfront(spec: ModelPerfSpec, space: SearchSpace, ctx: SweepContext[PerfFacts]) -> str | None:
    said: list[str] = []
    if spec.parameter == BATCH:
        said.append(pool_of(spec, ctx).line)
    prior = ctx.facts.prior
    if prior is not None and space.prior:
        values = sorted({p.value for p in space.prior}, key=lambda v: (str(type(v)), v))
        said.append(f"{spec.parameter} {', '.join(str(v) for v in values)} ran in sweep "
                    f"#{prior.sweep} (same model, nodes and config): its runs, their TGS "
                    "scaled by the values both sweeps run, stand in for those values here "
                    "(use_prior: false searches afresh)")
    if spec.values is not None and len(spec.values) > 1:
        said.append(f"of the {len(spec.values)} values given, one the runs show cannot beat "
                    "the best (by the search's bounds) is not run; the verdict names each "
                    "and why")
    elif spec.values is None:
        said.append("a value the runs show cannot beat the best (by the search's bounds) is "
                    "not run; the verdict names each and why")
    return "; ".join(said) or None
