"""`validate` / `submit --dry-run` on the daemon: what a submit would do, recorded nowhere —
the spec admitted (app/admission.py), the pinned nodes' states now, the kind's first plan
on an empty run list, each first job's name as the backend would build it, and the most
runs, jobs and node-hours the sweep may take."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from sweepd.app.admission import Admission
from sweepd.clusters.base import ControllerUnreachable, SubmitRefused
from sweepd.core.budgets import most_node_runs, most_runs, unbounded_why
from sweepd.core.cost_cap import applied_cap, stated_most
from sweepd.core.engine import Engine
from sweepd.core.submit import job_request
from sweepd.kinds.api import Finished, Plan, StartSweep, Stop, SweepContext
from sweepd.kinds.registry import kind_of
from sweepd.kinds.spec import SpecError, SweepSpec
from sweepd.util.hostlists import collect_nodes

# A token shaped like the engine's (`sw<sweep>-<8 hex>.<store id>`): `validate` names jobs
# with it, as long as a real one, so the name's length is the real name's.
SAMPLE_TOKEN = "sw1-00000000.000000"


async def dry_run(engine: Engine, admission: Admission, spec: SweepSpec) -> dict[str, Any]:
    """The plan a parsed spec would get, checked as a submission would be."""
    await admission.refuse_unknown_partition(spec)
    spec, _ = await admission.resolve_slot(spec)   # shown, not recorded
    kind = kind_of(spec.kind)
    facts = await admission.gather(spec)
    await admission.refuse_strangers(spec.node_list)
    states = await _node_states(engine, spec.node_list)
    checks = await admission.preflight(spec)
    config = engine.config
    ctx = SweepContext(runs=[], nodes=spec.node_list,
                       gpu_memory_gib=config.cluster.planning_pool, facts=facts,
                       gpus_per_node=config.cluster.gpus_per_node,
                       pool_given=config.cluster.pool_given,
                       settings_form=config.cluster.settings_form,
                       one_box=config.cluster.backend == "local")
    first = kind.plan(spec, ctx)
    dumped = spec.model_dump(mode="json")
    return {"kind": spec.kind, "name": spec.name or spec.default_name(),
            "nodes": spec.nodes, "node_count": len(spec.node_list),
            "backend": config.cluster.backend, "node_states": states,
            "first_plan": plan_dict(first), "preflight": [asdict(c) for c in checks],
            "job_names": await _job_names(engine, spec, first),
            **await _bounds(engine, spec.kind, spec.model, dumped), **_cap(engine, spec)}


def _cap(engine: Engine, spec: SweepSpec) -> dict[str, Any]:
    """The node-hour cap the sweep stops at (core/cost_cap.py) and where it comes from."""
    cap = applied_cap(spec, engine.config)
    return {"node_hour_cap": cap.hours, "node_hour_cap_basis": cap.source}


async def _job_names(engine: Engine, spec: SweepSpec, plan: Plan
                     ) -> list[dict[str, Any]]:
    """Each first job's name as the backend would build it, and the overrides it would
    carry outside the name; a submission the backend would refuse (a name over the
    toolkit's limit even so, a profile that cannot take effect) refuses the spec now."""
    backend = getattr(engine.backend, "inner", engine.backend)
    name_of = getattr(backend, "name_of", None)
    if name_of is None or isinstance(plan, (Finished, Stop, StartSweep)):
        return []
    out = []
    for run in plan:
        request = job_request(spec, run.params, token=SAMPLE_TOKEN, nodes=list(run.nodes),
                              output_dir=engine.outputs / "validate")
        try:
            fitted = await asyncio.to_thread(name_of, request)
        except SubmitRefused as e:
            what = f"{run.label}: submission would be refused: {e}"
            raise SpecError(what, [{"loc": [], "msg": what}]) from None
        out.append({"label": run.label, "name": fitted.name,
                    "bytes": len(fitted.name.encode()), "carried": list(fitted.carried)})
    return out


async def _node_states(engine: Engine, nodes: list[str]) -> dict[str, list[str]]:
    """State -> the pinned nodes in it, as the scheduler says now ({} if it is down)."""
    try:
        states = await engine.backend.node_states(nodes)
    except (ControllerUnreachable, RuntimeError):
        return {}
    by_state: dict[str, list[str]] = {}
    for node in nodes:
        by_state.setdefault(states.get(node, "unknown"), []).append(node)
    return by_state


async def _bounds(engine: Engine, kind: str, model: str, spec: dict[str, Any]
                  ) -> dict[str, Any]:
    """The most runs, jobs (every retry taken) and node-hours a sweep may take."""
    retries = engine.config.policy.max_retries
    most = most_runs(kind, spec)
    node_runs = most_node_runs(kind, spec)
    stated = stated_most(kind, spec, engine.config)   # what the cap rests on too
    hours, basis = stated if stated is not None else (None, None)
    if stated is None and node_runs is not None:
        # Not a bound (nothing limits a job's time): a guess from earlier jobs, shown only.
        past = await engine.store.sweeps.job_seconds_of(kind, model)
        if past:
            job_s = sum(past) / len(past)
            hours = round(node_runs * (1 + retries) * job_s / 3600, 2)
            basis = (f"a guess: {len(past)} earlier {kind} job(s) of {model} took "
                     f"{job_s / 3600:.2f} h (cluster time) on average")
    return {"most_runs": most, "most_jobs": None if most is None else most * (1 + retries),
            "max_retries": retries, "most_node_runs": node_runs, "most_node_hours": hours,
            "node_hours_basis": basis or "not bounded: nothing limits a job's time (a "
                                         "configured Slurm time_limit would)",
            "runs_unbounded": None if most is not None else unbounded_why(kind)}


def plan_dict(plan: Plan) -> dict[str, Any]:
    if isinstance(plan, Finished):
        return {"finished": plan.summary, "ok": plan.ok}
    if isinstance(plan, Stop):
        return {"stop": plan.reason, "rule": plan.rule}
    if isinstance(plan, StartSweep):
        return {"stage": plan.stage, "sweep": plan.spec}
    return {"runs": [{"label": r.label,
                      "params": r.params.model_dump(mode="json", exclude_defaults=True),
                      "nodes": collect_nodes(list(r.nodes)), "node_count": len(r.nodes),
                      "reason": r.reason, "rule": r.rule}
                     for r in plan]}
