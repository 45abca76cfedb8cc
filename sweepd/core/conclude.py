"""Concluding a finished job: classify it from its recorded facts, apply the policy,
and record the outcome, the rule and the evidence before anything acts on them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from sweepd.clusters.base import JobStatus
from sweepd.core.control import stop_sweep
from sweepd.core.jobtimes import job_end
from sweepd.core.kind_facts import job_ended
from sweepd.core.node_evidence import (
    NODE_FAULTS,
    nic_outcome,
    record_evidence,
    reset_nic,
    stored_evidence,
    with_evidence,
)
from sweepd.core.outside_cancel import as_cancel_verdict, outside_cancel
from sweepd.core.policy import Act, Action, Case, SweepFacts, decide
from sweepd.core.stored_facts import job_facts
from sweepd.kinds.registry import kind_of
from sweepd.monitor.classify import classify
from sweepd.monitor.classify_tables import SIGNAL_TIER, Tier
from sweepd.monitor.facts import FailureClass, StepFact, Verdict
from sweepd.monitor.steady import no_steady_steps, steady_state
from sweepd.reports.lines import result_line, retry_line
from sweepd.store.rows import Job
from sweepd.store.states import JobState, RunState
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

log = structlog.get_logger("sweepd.core.conclude")

# The rule that keeps the measurement of a job cancelled after its steady window.
MEASURED_CANCEL = "cancelled.measured"

_JOB_END = {Act.ACCEPT: JobState.DONE, Act.RETRY: JobState.RETRIED, Act.RECORD: JobState.FAILED,
            Act.STOP: JobState.FAILED}


def _job_end(act: Act, verdict: Verdict) -> JobState:
    """A cancel outside sweepd ended the job, whatever the policy does next (run it again,
    or ask): it neither failed nor was retried for a failure."""
    return JobState.CANCELLED if verdict.klass == FailureClass.CANCELLED else _JOB_END[act]


def _judged(j: Job) -> bool:
    """An earlier attempt the policy judged and did not accept."""
    return j.state in (JobState.RETRIED, JobState.FAILED) or _was_cancelled(j)


def _verdict_of(job: Job) -> Verdict:
    klass = FailureClass(job.failure_class) if job.failure_class else None
    return Verdict(klass=klass, node=job.failure_node, evidence=job.failure_line,
                   detail=job.failure_detail)


async def conclude(engine: EngineParts, job: Job, status: JobStatus) -> None:
    store = engine.store
    sweep = await store.sweeps.get(job.sweep_id)
    spec = engine.spec_of(sweep)
    await store.jobs.update(job.id, scheduler_state=str(status.state))
    # What the kind keeps from the job's end (its files), stored before it is judged.
    job = await job_ended(store, sweep.kind, await store.jobs.get(job.id))
    hung = job.state == JobState.HUNG
    facts = await job_facts(store, job, expected_steps=spec.steps, hung=hung,
                            cancelled_by_us=hung, scheduler_exit=status.exit_code)
    verdict = classify(facts)
    steps = [StepFact(rank=0, step=s.step, tgs=s.tgs, mfu=s.mfu)
             for s in await store.jobs.steps(job.id)]
    cancel = outside_cancel(str(status.state), by_sweepd=hung, steps=steps,
                            profiler=bool(job.profiler), expected_steps=spec.steps,
                            failure_only=bool(getattr(spec, "failure_only", False)))
    if cancel is not None and verdict.klass in (None, FailureClass.CANCELLED):
        verdict = as_cancel_verdict(verdict, cancel)
    else:
        cancel = None   # a failure before the cancel is the job's result
    tgs = mfu = None
    if verdict.klass is None:
        steady = steady_state(steps, bool(job.profiler))
        if steady is None and facts.log_lost:
            verdict = Verdict(FailureClass.LOG_LOST, evidence=verdict.evidence,
                              detail=f"the log could not be read; last step read "
                                     f"{job.last_step}")
        elif steady is None and getattr(spec, "failure_only", False):
            pass   # a run short of the steady window by design: it ran, that is its result
        elif steady is None:
            verdict = Verdict(FailureClass.UNKNOWN, evidence=no_steady_steps(bool(job.profiler)),
                              detail=f"last step {job.last_step}")
        else:
            tgs, mfu = steady
    all_jobs = await store.jobs.of_sweep(sweep.id)
    prior = [_verdict_of(j) for j in all_jobs
             if j.run_id == job.run_id and j.id != job.id and _judged(j)]
    history = [_verdict_of(j) for j in all_jobs if j.id != job.id and _judged(j)]
    exclusions = await store.exclusions.of_sweep(sweep.id)
    need = min(spec.needed_nodes, len(expand_nodes(job.nodes)))
    kind = kind_of(sweep.kind)
    facts_of_sweep = SweepFacts(spec.node_list, [e.node for e in exclusions if e.job_id], need,
                                history, exclude_on_fault=kind.exclude_on_fault,
                                config_stops=kind.stops.on_config_error,
                                frozen_nodes=kind.frozen_nodes,
                                by_person=[e.node for e in exclusions if not e.job_id],
                                others_cancelled=verdict.klass == FailureClass.CANCELLED
                                and others_cancelled(job, all_jobs, engine.clock.now()))
    # The node's own evidence, and a NIC reset where allowed, are stored before the
    # decision: what it records and says is read back from the store.
    if verdict.klass in NODE_FAULTS and verdict.node:
        await record_evidence(engine, sweep.id, [verdict.node], job_id=job.id)
    nic = None
    if verdict.klass == FailureClass.NIC and verdict.node:
        await reset_nic(engine, sweep.id, verdict.node, job.id)
        nic = await nic_outcome(store, sweep.id, verdict.node, job.id)
    action = decide(Case(verdict, prior, facts_of_sweep, engine.config.policy, nic_reset=nic,
                         cancel=cancel))
    log.info("job.concluded", job=job.id, backend_id=job.backend_id, klass=verdict.klass,
             act=action.act, rule=action.rule)
    # The job's end, the run's result, an exclusion, a stop: all or nothing, so a crash
    # can never leave a finished job whose run still looks unattempted.
    async with store.tx():
        await _record(engine, job, status, verdict, action, tgs, mfu)


async def _record(engine: EngineParts, job: Job, status: JobStatus, verdict: Verdict,
                  action: Action, tgs: float | None, mfu: float | None) -> None:
    store = engine.store
    now = engine.clock.now()
    nodes = [n for n in (verdict.node, action.exclude) if n]
    evidence = with_evidence(verdict.evidence,
                             await stored_evidence(store, job.sweep_id, nodes) if nodes else [])
    ended_at, _ = job_end(engine.clock, job, status)
    await store.jobs.transition(
        job.id, _job_end(action.act, verdict), action.reason, rule=action.rule,
        evidence=evidence, ended_at=ended_at, tgs=tgs, mfu=mfu,
        failure_class=verdict.klass and str(verdict.klass), failure_node=verdict.node,
        failure_line=verdict.evidence, failure_detail=verdict.detail)
    if action.exclude:
        await store.exclusions.exclude(job.sweep_id, action.exclude, job.id, action.reason,
                                            action.rule, evidence)
    sweep = await store.sweeps.get(job.sweep_id)
    run = await store.runs.get(job.run_id)
    spec = sweep.spec
    n_nodes = len(expand_nodes(job.nodes))
    model = run.params.model or str(spec.get("model", "?"))
    line = result_line(model, n_nodes, run.label, job.backend_id, action.outcome, tgs, mfu,
                       _describe(verdict))
    if action.rule == MEASURED_CANCEL:   # a pass that is no success: the line says why
        line = f"{line} ({action.reason})"
    if action.act == Act.ACCEPT:
        await store.runs.transition(run.id, RunState.PASSED, line, rule=action.rule,
                                        progress=line, outcome="pass", tgs=tgs, mfu=mfu)
    elif action.act == Act.RECORD:
        await store.runs.transition(run.id, RunState.FAILED, line, rule=action.rule,
                                        evidence=verdict.evidence, progress=line,
                                        outcome=action.outcome,
                                        failure_class=verdict.klass and str(verdict.klass),
                                        detail=action.reason)
    elif action.act == Act.RETRY:
        await store.events.add(sweep.id, "decision", action.reason, rule=action.rule,
                                     evidence=evidence, run_id=run.id, job_id=job.id)
        await store.events.add(sweep.id, "progress", retry_line(line, action.reason),
                                     run_id=run.id, job_id=job.id)
        if action.delay_s:
            await store.runs.set_not_before(run.id, now + action.delay_s)
    else:
        # A timeout prints on the rank left waiting, usually not the one that failed: it
        # is named as that, not as failing (red team f12: "Failing node(s): chi2863").
        waiting = verdict.node if _timeout(verdict) else None
        failing = [n for n in (None if waiting else verdict.node, action.exclude) if n]
        recovery, outcome = _recovery(verdict, job), ("failed again" if job.attempt > 1
                                                      else "not recoverable by rule")
        if verdict.klass == FailureClass.CANCELLED:   # no failure: a person's word, asked
            recovery = "none: a cancel outside sweepd is asked about, not run again twice"
            outcome = "waiting for a person: resume runs it again, abort ends the sweep"
        if "NIC reset of" in (evidence or ""):
            recovery, outcome = "NIC reset, then ibstat", "the NIC did not come back Active"
        await stop_sweep(engine, sweep, action.reason, rule=action.rule,
                         evidence=evidence, failing_nodes=sorted(set(failing)),
                         recovery=recovery, outcome=outcome, waiting_node=waiting)


# Cancels this close together (cluster seconds, as concluded) are taken as one action: a
# job ends COMPLETING for a while after scancel, so one scancel of several jobs reaches
# sweepd over several passes.
CANCELLED_TOGETHER_S = 120.0


def others_cancelled(job: Job, jobs: list[Job], now: float) -> bool:
    """Every other run the sweep had going was cancelled outside sweepd too (a person
    cancelled the whole sweep): per run, its latest job is cancelled by the scheduler or
    was concluded as cancelled, or it is sweepd's own re-run of a job whose cancel was
    concluded within CANCELLED_TOGETHER_S."""
    by_run: dict[int, list[Job]] = {}
    for j in sorted(jobs, key=lambda j: j.id):
        if j.run_id != job.run_id:
            by_run.setdefault(j.run_id, []).append(j)
    going = [_cancelled_run(js, now - CANCELLED_TOGETHER_S) for js in by_run.values()
             if _going(js[-1])]
    return bool(going) and all(going)


def _was_cancelled(j: Job) -> bool:
    # Retried: how a store written before a cancel was shown cancelled holds it.
    return j.state in (JobState.CANCELLED, JobState.RETRIED) and \
        j.failure_class == FailureClass.CANCELLED


def _going(j: Job) -> bool:
    return j.state in (JobState.SUBMITTING, JobState.QUEUED, JobState.RUNNING) or \
        _was_cancelled(j)


def _cancelled_run(js: list[Job], since: float) -> bool:
    last = js[-1]
    if _was_cancelled(last) or last.scheduler_state == "CANCELLED":
        return True
    before = js[-2] if len(js) > 1 else None
    return before is not None and _was_cancelled(before) and (before.ended_at or 0.0) >= since


def _recovery(verdict: Verdict, job: Job) -> str:
    if job.attempt > 1:
        return f"{job.attempt - 1} retr{'y' if job.attempt == 2 else 'ies'}"
    return "none (the rule stops at once)"


def _describe(verdict: Verdict) -> str | None:
    if verdict.klass is None or (verdict.klass == FailureClass.OOM and not verdict.detail):
        return None
    where = f" on {verdict.node}" if verdict.node else ""
    if verdict.node and _timeout(verdict):
        where = f", {verdict.node} left waiting"
    return f"{verdict.klass}{where}" + (f": {verdict.detail}" if verdict.detail else "")


def _timeout(verdict: Verdict) -> bool:
    """A collective or coordination timeout: its node is the rank that waited."""
    return verdict.klass is not None and SIGNAL_TIER.get(verdict.klass) is Tier.TIMEOUT
