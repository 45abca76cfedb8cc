"""A queued job whose pinned nodes died after it was submitted.

The node check (`node_check`) runs before a submission only, and hang detection only
watches running jobs: a job pending on a node that went down or was drained meanwhile
would wait forever (Slurm: `ReqNodeNotAvail, UnavailableNodes:…`). At the poll cadence,
a pending job whose scheduler reason says its nodes are unavailable has its nodes checked
with sinfo; the nodes sinfo confirms unusable are handled as the sweep's kind handles a
node fault (`policy.queued_node_fault`). A reason that says the nodes are busy
(`Resources`, `Priority`: other jobs hold them) is never acted on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from sweepd.clusters.base import ControllerUnreachable, JobStatus, SchedulerState
from sweepd.core.control import stop_sweep
from sweepd.core.node_check import resume_where_allowed, stop_unusable, unusable
from sweepd.core.node_evidence import record_evidence, stored_evidence, with_evidence
from sweepd.core.policy import Act, SweepFacts, queued_node_fault
from sweepd.kinds.registry import kind_of
from sweepd.store.rows import Job, Sweep
from sweepd.store.states import JobState, SweepState
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

log = structlog.get_logger("sweepd.core.queued_check")

# Slurm's pending reasons that say a required node cannot be used (down, drained, not
# responding), as squeue prints them or as scontrol does (spaces as `_`). Slurm lists
# reserved nodes under the same words: sinfo decides which nodes are really unusable.
_UNAVAILABLE = ("ReqNodeNotAvail", "NodeDown", "Nodes required for job are DOWN")


def nodes_unavailable(status: JobStatus | None) -> bool:
    """The scheduler holds this pending job because a required node is unavailable (not
    because the nodes are busy: `Resources`, `Priority` and the like)."""
    if status is None or status.state != SchedulerState.PENDING or not status.reason:
        return False
    reason = status.reason.replace("_", " ")
    return any(reason.startswith(word) for word in _UNAVAILABLE)


async def check_queued(engine: EngineParts, job: Job, status: JobStatus | None) -> bool:
    """True when the job was acted on (cancelled, the sweep stopped, or a node resumed)."""
    if not nodes_unavailable(status) or job.backend_id is None:
        return False
    assert status is not None and status.reason is not None
    sweep = await engine.store.sweeps.get(job.sweep_id)
    if sweep.state != SweepState.RUNNING:
        return False
    try:
        bad = await unusable(engine, expand_nodes(job.nodes))
        if not bad:
            return False   # the reason lags the node states (resumed meanwhile): it starts
        still, tried = await resume_where_allowed(engine, sweep, bad)
    except ControllerUnreachable as e:   # asked again at the next poll
        log.warning("queued_check.unreachable", job=job.id, error=str(e))
        return False
    waiting = f"job {job.backend_id} pending: {status.reason}"
    if not still:
        return True    # resumed: the job can start where it waits
    await _handle(engine, sweep, job, still, tried, waiting)
    return True


async def _handle(engine: EngineParts, sweep: Sweep, job: Job, still: dict[str, str],
                  tried: list[str], waiting: str) -> None:
    spec = engine.spec_of(sweep)
    kind = kind_of(sweep.kind)
    exclusions = await engine.store.exclusions.of_sweep(sweep.id)
    facts = SweepFacts(spec.node_list, [e.node for e in exclusions if e.job_id],
                       min(spec.needed_nodes, len(expand_nodes(job.nodes))),
                       exclude_on_fault=kind.exclude_on_fault, frozen_nodes=kind.frozen_nodes,
                       by_person=[e.node for e in exclusions if not e.job_id])
    action, exclude = queued_node_fault(sorted(still), facts, engine.config.policy)
    evidence = "; ".join([*(f"sinfo: {n} {s}" for n, s in sorted(still.items())), waiting])
    log.warning("job.queued_on_dead_nodes", job=job.id, backend_id=job.backend_id,
                nodes=sorted(still), act=action.act, rule=action.rule)
    if action.act == Act.STOP and action.rule == "node.unusable":
        await stop_unusable(engine, sweep, still, tried, waiting=waiting)
        return
    await record_evidence(engine, sweep.id, sorted(still), job_id=job.id)
    evidence = with_evidence(evidence, await stored_evidence(engine.store, sweep.id,
                                                             sorted(still))) or evidence
    async with engine.store.tx():
        for node in exclude:
            await engine.store.exclusions.exclude(sweep.id, node, job.id, action.reason,
                                                       action.rule, evidence)
        if action.act == Act.STOP:
            await stop_sweep(engine, sweep, action.reason, rule=action.rule,
                             evidence=evidence, failing_nodes=sorted(still),
                             recovery="; ".join(tried), outcome="not recoverable by rule")
            return
        # Cancelled, not failed: the job never ran, so no retry of the run is used.
        await engine.store.jobs.transition(job.id, JobState.CANCELLED, action.reason,
                                               rule=action.rule, evidence=evidence,
                                               ended_at=engine.clock.now())
        await engine.store.events.add(sweep.id, "decision", action.reason, rule=action.rule,
                                            evidence=evidence, run_id=job.run_id, job_id=job.id)
        await engine.store.events.add(sweep.id, "progress", f"sweep {sweep.id}: job "
                                            f"{job.backend_id} {action.reason}", run_id=job.run_id,
                                            job_id=job.id)
    engine.cancel_later(job.backend_id or "")
    engine.mark(sweep.id)
    engine.notify()
