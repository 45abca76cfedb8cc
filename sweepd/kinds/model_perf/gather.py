"""Model perf's gather: an earlier sweep of the same cell to start from, and the param
memory (GB) the latest job of the same model on the same nodes printed, from a sweep of any
kind. Only that model's sweeps are read (the
store selects them by the spec's `model`), so a plan costs the same at 10 sweeps as at
1,000 of other models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf import exports
from sweepd.kinds.model_perf.facts import PerfFacts, Prior
from sweepd.kinds.model_perf.params import swept_value
from sweepd.kinds.model_perf.probes import probes
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.registry import NO_CONTEXT, GatherContext
from sweepd.kinds.spec import SpecError
from sweepd.store.states import SweepState

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep
    from sweepd.store.store import Store

# What makes two sweeps the same cell: the same model on as many nodes, searching the same
# parameter with the same config (overrides, env, memory settings).
_CELL = ("parameter", "second", "overrides", "env", "mem_fraction", "gpu_memory_gib")


async def gather(store: Store, spec: ModelPerfSpec, where: GatherContext = NO_CONTEXT) -> PerfFacts:
    """An earlier sweep of the same cell and the param memory an earlier job printed."""
    # One query (SQLite reads each sweep's spec JSON for it): both facts come from it.
    same_model = await store.sweeps.of_model(spec.model)
    return PerfFacts(prior=await prior(store, spec, same_model),
                     param_gb=await store.jobs.latest_mem_used_on(spec.nodes,
                                                                  [s.id for s in same_model]))


async def prior(store: Store, spec: ModelPerfSpec, same_model: Sequence[Sweep]) -> Prior | None:
    """The latest settled sweep of the same cell (among the sweeps of the spec's model,
    oldest first): where it found the peak and the largest batch that fitted, so this sweep
    starts from them (search_space.py). Not for a two-parameter sweep: its peak and
    fit are each setting's own."""
    if spec.second is not None or not spec.use_prior:
        return None
    for sweep in reversed(same_model):
        if is_prior(sweep, spec):
            return await prior_of(store, spec, sweep)
    return None


def is_prior(sweep: Sweep, spec: ModelPerfSpec) -> bool:
    """A done model perf sweep whose settled verdict found a best value in the same cell."""
    verdict = sweep.verdict or {}
    return (sweep.state == SweepState.DONE and sweep.kind == exports.NAME
            and bool(verdict.get("settled", True)) and verdict.get("best") is not None
            and _same_cell(sweep.spec, spec, verdict))


async def prior_of(store: Store, spec: ModelPerfSpec, sweep: Sweep) -> Prior:
    """What `sweep` (a prior: `is_prior`) tells this one: its peak, fit, OOM and probes."""
    verdict = sweep.verdict or {}
    on = int(verdict.get("nodes") or len(spec.node_list))
    runs = [r for r in await store.runs.of_sweep(sweep.id) if r.node_count == on]
    # One sweep's values are all numbers or all text (spec validation): comparable.
    fits: list[Any] = [swept_value(spec.parameter, r.params, spec.values) for r in runs
                       if r.outcome == "pass"]
    ooms: list[Any] = [swept_value(spec.parameter, r.params, spec.values) for r in runs
                       if r.outcome == "oom"]
    # Its runs as probes, with their memory lines: the same planner's view of them.
    then = SweepContext(runs=runs, nodes=spec.node_list[:on], gpu_memory_gib=0.0,
                        facts=PerfFacts(), jobs=await store.jobs.of_sweep(sweep.id))
    return Prior(sweep=sweep.id, peak=verdict["best"], tgs=verdict.get("tgs"),
                 max_fit=max(fits, default=verdict["best"]), oom=min(ooms, default=None),
                 probes=tuple(probes(spec, then)))


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
