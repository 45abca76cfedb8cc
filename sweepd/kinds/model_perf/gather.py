"""Model perf's gather: an earlier sweep of the same cell to start from, and the param
memory (GB) the latest job of the same model on the same nodes printed, from a sweep of any
kind. The store picks out what each can come from (the model's settled sweeps of this kind;
the jobs on these nodes with a memory line), so a plan costs the same beside 10 running
sweeps of the model as beside 1,000, and whatever the other models' sweeps."""

from __future__ import annotations

import json
from functools import lru_cache
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
    return PerfFacts(prior=await prior(store, spec),
                     param_gb=await store.jobs.latest_mem_used_of_model(spec.nodes, spec.model))


async def prior(store: Store, spec: ModelPerfSpec) -> Prior | None:
    """The latest settled sweep of the same cell: where it found the peak and the largest
    batch that fitted, so this sweep starts from them (search_space.py). Not for a
    two-parameter sweep: its peak and fit are each setting's own. Asked of the store only
    when it is used: the model's sweeps it can be (`settled_of_model`, oldest first; each
    judged by `is_prior`, of which the store's choice is a superset)."""
    if spec.second is not None or not spec.use_prior:
        return None
    for sweep in reversed(await store.sweeps.settled_of_model(exports.NAME, spec.model)):
        if is_prior(sweep, spec):
            return await prior_of(store, spec, sweep)
    return None


def is_prior(sweep: Sweep, spec: ModelPerfSpec) -> bool:
    """A done model perf sweep whose settled verdict found a best value in the same cell."""
    verdict = sweep.verdict or {}
    return (sweep.state == SweepState.DONE and sweep.kind == exports.NAME
            and bool(verdict.get("settled", True)) and verdict.get("best") is not None
            and _same_cell(sweep.spec_json, spec, verdict))


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


@lru_cache(maxsize=512)
def _stored(spec_json: str) -> ModelPerfSpec | None:
    """A stored spec as a model perf spec, or None where this version no longer reads it.
    Kept by its JSON (a done sweep's never changes): each plan judges the same settled
    sweeps of its model again, and need not parse them again."""
    try:
        # As stored (no repo needed to read a toolkit model's spec); names were resolved
        # when each was accepted.
        other = ModelPerfSpec.from_stored(json.loads(spec_json))
    except (SpecError, ValueError):
        return None   # a spec this version no longer reads is nothing to start from
    return other if isinstance(other, ModelPerfSpec) else None


def _same_cell(spec_json: str, spec: ModelPerfSpec, verdict: dict[str, Any]) -> bool:
    other = _stored(spec_json)
    if other is None or other.model != spec.model:
        return False
    if int(verdict.get("nodes") or len(other.node_list)) != len(spec.node_list):
        return False
    return all(getattr(other, k) == getattr(spec, k) for k in _CELL)
