"""Model perf sweep: the batch size (or other parameter) with the highest steady TGS."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sweepd.core.states import SweepState
from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf import exports, hooks, plan_two, report
from sweepd.kinds.model_perf import plan as perf_plan
from sweepd.kinds.model_perf.demo import DEMO
from sweepd.kinds.model_perf.facts import PerfFacts, Prior
from sweepd.kinds.model_perf.params import swept_value
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.registry import NO_CONTEXT, ClientHooks, GatherContext, Kind
from sweepd.kinds.spec import SpecError

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep
    from sweepd.store.store import Store

# What makes two sweeps the same cell: the same model on as many nodes, searching the same
# parameter with the same config (overrides, env, memory settings).
_CELL = ("parameter", "second", "overrides", "env", "mem_fraction", "gpu_memory_gib")


async def gather(store: Store, spec: ModelPerfSpec, where: GatherContext = NO_CONTEXT) -> PerfFacts:
    """An earlier sweep of the same cell and the param memory an earlier job printed."""
    sweeps = await store.sweeps()
    return PerfFacts(prior=await _prior(store, spec, sweeps),
                     param_gb=await _param_gb(store, spec, sweeps))


async def _prior(store: Store, spec: ModelPerfSpec, sweeps: list[Sweep]) -> Prior | None:
    """The latest settled sweep of the same cell: where it found the peak and the largest
    batch that fitted, so this sweep starts from them (perf_plan.search_space). Not for a
    two-parameter sweep: its peak and fit are each setting's own."""
    if spec.second is not None:
        return None
    for sweep in reversed(sweeps):
        verdict = sweep.verdict or {}
        if sweep.state != SweepState.DONE or sweep.kind != KIND.name \
                or not verdict.get("settled", True) or verdict.get("best") is None \
                or not _same_cell(sweep.spec, spec, verdict):
            continue
        on = int(verdict.get("nodes") or len(spec.node_list))
        runs = [r for r in await store.runs(sweep.id) if r.node_count == on]
        # One sweep's values are all numbers or all text (spec validation): comparable.
        fits: list[Any] = [swept_value(spec.parameter, r.params, spec.values) for r in runs
                           if r.outcome == "pass"]
        ooms: list[Any] = [swept_value(spec.parameter, r.params, spec.values) for r in runs
                           if r.outcome == "oom"]
        # Its runs as probes, with their memory lines: the same planner's view of them.
        then = SweepContext(runs=runs, nodes=spec.node_list[:on], gpu_memory_gib=0.0,
                            facts=PerfFacts(), jobs=await store.jobs(sweep.id))
        return Prior(sweep=sweep.id, peak=verdict["best"], tgs=verdict.get("tgs"),
                     max_fit=max(fits, default=verdict["best"]), oom=min(ooms, default=None),
                     probes=tuple(perf_plan.probes(spec, then)))
    return None


async def _param_gb(store: Store, spec: ModelPerfSpec, sweeps: list[Sweep]) -> float | None:
    """Param memory (GB) the latest job of the same model on the same nodes printed."""
    same_model = [s.id for s in sweeps if s.spec.get("model") == spec.model]
    return await store.latest_mem_used_on(spec.nodes, same_model)


def _same_cell(raw: dict[str, Any], spec: ModelPerfSpec, verdict: dict[str, Any]) -> bool:
    try:
        # As stored (no repo needed to read a toolkit model's spec); names were resolved
        # when each was accepted.
        other = ModelPerfSpec.from_stored(raw)
        same_model = other.model == spec.model
    except (SpecError, ValueError):
        return False   # a spec this version no longer reads is nothing to start from
    if not isinstance(other, ModelPerfSpec) or not same_model:
        return False
    if int(verdict.get("nodes") or len(other.node_list)) != len(spec.node_list):
        return False
    return all(getattr(other, k) == getattr(spec, k) for k in _CELL)


def most_runs(spec: Mapping[str, Any]) -> int:
    """At most `max_runs`, and no more than the values given."""
    values = spec.get("values")
    cap = int(spec.get("max_runs", 12))
    return min(cap, len(values)) if isinstance(values, list) else cap


KIND = Kind(exports.NAME, ModelPerfSpec, plan_two.plan, report.markdown, report.rows,
            plot=report.plot, gather=gather, demo=DEMO, most_runs=most_runs,
            client=ClientHooks(report_action=hooks.apply, flags=frozenset({"apply"})))
