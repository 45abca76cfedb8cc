"""The runs must be comparable before a verdict rests on them: a value run again that read
lower beyond two runs' noise says the nodes slowed mid-sweep (`search.slowed`, the spec's
check_slowdown). The sweep then names the runs between which the readings fell and asks,
rather than claim an optimum from runs before and after the slowdown."""

from __future__ import annotations

from sweepd.kinds.api import Stop, SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.probes import latest_jobs, probe_runs
from sweepd.kinds.model_perf.search import Probe, SearchSpace, Slowdown, slowdown
from sweepd.kinds.model_perf.search.slowed import slow_bar
from sweepd.kinds.model_perf.spec import ModelPerfSpec

SLOWED_STOP = "model_perf.nodes_slowed"


def slowed_stop(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts], space: SearchSpace,
                seen: list[Probe]) -> Stop | str | None:
    """`space` with the noise the runs' steps show (not what two runs of one value did:
    the drop would raise it and hide itself). A Stop that asks; once a person resumed, the
    caveat the verdict carries; None while every value run again agrees."""
    found = slowdown(space, seen)
    if found is None:
        return None
    said = _said(spec, ctx, space, found)
    if SLOWED_STOP in ctx.acknowledged_stops:
        return (f"{said}; a person resumed the sweep, so its runs were read as one curve "
                "and the best is not an optimum measured on comparable runs")
    return Stop(f"{said}. No optimum is claimed from runs measured before and after it: "
                "check the nodes (rocm-smi clocks and temperature, dmesg), then resume to "
                "go on reading the runs as one curve, or abort and sweep again",
                SLOWED_STOP, evidence=_evidence(spec, ctx, seen, found))


def _said(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts], space: SearchSpace,
          found: Slowdown) -> str:
    runs = probe_runs(spec, ctx)
    first, again = runs[found.first], runs[found.again]
    between = runs[found.first + 1:found.again + 1]
    fell = f"run {again.seq}" if len(between) == 1 else \
        f"one of runs {between[0].seq}-{again.seq} (no run between shows which)"
    return (f"the nodes slowed: {spec.parameter}={found.value} read {found.drop:+.1%} on "
            f"run {again.seq} against its run {first.seq}, beyond the noise of two runs' "
            f"difference ({slow_bar(space):.1%}); the readings fell at {fell}, so the runs "
            "before and after are not one curve (a node throttling or a degraded GPU slows "
            "every job after it)")


def _evidence(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts], seen: list[Probe],
              found: Slowdown) -> str:
    runs = probe_runs(spec, ctx)
    jobs = latest_jobs(ctx.jobs)
    parts = []
    for k in range(found.first, found.again + 1):
        job = jobs.get(runs[k].id)
        tgs = seen[k].tgs
        parts.append(f"{runs[k].label}: {'-' if tgs is None else f'{tgs:,.0f}'} TGS"
                     + (f" (job {job.backend_id})" if job and job.backend_id else ""))
    return "; ".join(parts)
