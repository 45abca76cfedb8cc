"""Planning one sweep: start the attempts that are due, ask the kind's strategy for the
next step (new runs, a verdict, a stop) and act on it. The pass (core/engine.py) says which
sweeps to plan and when; this is what planning one of them does."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from sweepd.core.children import start_child
from sweepd.core.control import stop_sweep
from sweepd.core.finish import finish
from sweepd.core.node_check import ensure_usable
from sweepd.core.submit import apply
from sweepd.kinds.api import Finished, GatherError, Plan, StartSweep, Stop, SweepContext
from sweepd.kinds.registry import gather_context, kind_of
from sweepd.store.rows import Run, Sweep
from sweepd.store.states import JobState, RunState, SweepState
from sweepd.util.hostlists import collect_nodes, expand_nodes

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts
    from sweepd.core.submit import Submitter

    class Planner(EngineParts, Protocol):
        """What planning needs of the engine beyond its parts: its submitter."""

        submitter: Submitter


async def advance(engine: Planner, sweep: Sweep) -> None:
    runs = await engine.store.runs.of_sweep(sweep.id)
    jobs = await engine.store.jobs.of_sweep(sweep.id)
    busy = {j.run_id for j in jobs if j.state in (JobState.SUBMITTING, JobState.QUEUED,
                                                   JobState.RUNNING, JobState.HUNG)}
    now = engine.clock.now()
    for run in runs:
        if run.state in (RunState.PENDING, RunState.ACTIVE) and run.id not in busy and \
                (run.not_before is None or run.not_before <= now):
            await start_attempt(engine, sweep, run)
            if (await engine.store.sweeps.get(sweep.id)).state != SweepState.RUNNING:
                return
    decision = await plan(engine, sweep, runs)
    if isinstance(decision, Finished):
        await finish(engine, sweep, decision)
        return
    if isinstance(decision, Stop):
        await stop_sweep(engine, sweep, decision.reason, rule=decision.rule,
                         evidence=decision.evidence, failing_nodes=[], recovery="none",
                         outcome="stopped by the sweep's own rule")
        return
    if isinstance(decision, StartSweep):   # a campaign's next stage: a sweep of its own
        await start_child(engine, sweep, decision)
        return
    for new in decision:
        run = await engine.store.runs.add(sweep.id, new.label, new.params,
                                              collect_nodes(list(new.nodes)), new.reason, new.rule)
        for line in new.progress:
            await engine.store.events.add(sweep.id, "progress", line, run_id=run.id)
        await start_attempt(engine, sweep, run)
        # A submission that stopped the sweep (refused, no checkout, the cost cap) ends the
        # wave: the next run would stop it a second time.
        if (await engine.store.sweeps.get(sweep.id)).state != SweepState.RUNNING:
            return


async def plan(engine: EngineParts, sweep: Sweep, runs: list[Run]) -> Plan:
    """The kind's strategy asked, with the facts its gather finds (at the first plan, those
    its submission gathered, kept in `engine.gathered`)."""
    spec = engine.spec_of(sweep)
    kind = kind_of(sweep.kind)
    excluded = {e.node for e in await engine.store.exclusions.of_sweep(sweep.id)}
    # A slot not yet resolved to nodes (an older sweepd's stored spec) names none: the
    # kind's own check says so (xla-tuning: preflight.slot_unresolved).
    pinned = spec.node_list if spec.nodes else []
    nodes = [n for n in pinned if n not in excluded]
    found, facts = engine.gathered.take(sweep.id, engine.clock.now())
    try:
        if not found:
            facts = await kind.gather(engine.store, spec,
                                      replace(gather_context(engine.config), sweep=sweep.id))
    except GatherError as e:   # what it refers to is gone since it was accepted
        return Finished(False, f"{kind.name} cannot plan: {e}", {"error": str(e)})
    # Stops a person already resumed from: the strategy must not raise them again.
    acknowledged = [e.rule for e in await engine.store.events.of_sweep(sweep.id, kind="transition")
                    if e.to_state == SweepState.AWAITING_DECISION and e.rule]
    ctx = SweepContext(runs=runs, nodes=nodes,
                       gpu_memory_gib=engine.config.cluster.planning_pool, facts=facts,
                       jobs=await engine.store.jobs.of_sweep(sweep.id),
                       acknowledged_stops=acknowledged,
                       gpus_per_node=engine.config.cluster.gpus_per_node,
                       pool_given=engine.config.cluster.pool_given,
                       settings_form=engine.config.cluster.settings_form,
                       one_box=engine.config.cluster.backend == "local")
    return kind.plan(spec, ctx)


async def start_attempt(engine: Planner, sweep: Sweep, run: Run) -> None:
    """A new job for the run on its usable nodes, submitted; or the sweep stopped when too
    few nodes are left."""
    spec = engine.spec_of(sweep)
    excluded = {e.node for e in await engine.store.exclusions.of_sweep(sweep.id)}
    pinned = expand_nodes(run.nodes)
    nodes = [n for n in spec.node_list if n in set(pinned) and n not in excluded]
    need = min(spec.needed_nodes, len(pinned))
    if len(nodes) < need:
        left = f"{len(nodes)} usable node{'' if len(nodes) == 1 else 's'}"
        await stop_sweep(engine, sweep, f"only {left} left; the sweep's min_nodes is "
                         f"{need}", rule="nodes.below_minimum", evidence=None,
                         failing_nodes=sorted(excluded), recovery="node exclusion",
                         outcome="too few nodes")
        return
    if not await ensure_usable(engine, sweep, nodes):
        return
    if run.state == RunState.PENDING:
        await engine.store.runs.transition(run.id, RunState.ACTIVE, "submitting",
                                               rule="engine.submit")
    token = await engine.submitter.new_token(sweep.id)
    job = await engine.store.jobs.create(run, token, job_name="", nodes=collect_nodes(nodes))
    await apply(engine, await engine.submitter.submit(sweep, run, job))
