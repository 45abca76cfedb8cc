"""Drives every sweep: submits, follows jobs, applies the policy, asks the strategy.

One pass (`step`) at a time; each pass reads the facts it needs from the store and writes
every decision back before acting on it (write-ahead), so a crash at any point is
recovered by the next pass of a new process.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from sweepd.clock import Clock
from sweepd.clusters.base import (
    ClusterBackend,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    SchedulerState,
    SubmitRefused,
)
from sweepd.config import Config
from sweepd.follow import LogFollower
from sweepd.jobs import conclude
from sweepd.nodes import ensure_usable
from sweepd.specs import collect_nodes, parse_spec
from sweepd.states import JobState, RunState, SweepState
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.store import Store
from sweepd.strategies.base import Finished, Plan, Stop, SweepContext
from sweepd.strategies.registry import kind_of
from sweepd.sweeps import stop_sweep
from sweepd.worktrees import GitError

log = structlog.get_logger("sweepd.engine")

CONTROLLER_DOWN_KEY = "controller_down_since"


@dataclass
class _TailClock:
    """Per-job log polling: prompt while output flows, exponential backoff when silent."""

    next_at: float = 0.0
    interval: float = 0.0


@dataclass
class Engine:
    store: Store
    backend: ClusterBackend
    clock: Clock
    config: Config
    follower: LogFollower = field(init=False)
    _tail: dict[int, _TailClock] = field(default_factory=dict, init=False)
    _last_poll: float = field(default=0.0, init=False)
    _controller_down_since: float | None = field(default=None, init=False)
    # Set when something changed: `changed` wakes the engine loop, `news` wakes clients
    # waiting for progress (separate, so a waiting client never delays the engine).
    changed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _news: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _to_cancel: list[str] = field(default_factory=list, init=False)
    # Sweeps to plan on the next pass; None: all (a new process knows nothing yet).
    _dirty: set[int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.follower = LogFollower(self.store, self.clock)

    async def close(self) -> None:
        await self.follower.retain(set())

    def cancel_later(self, backend_id: str) -> None:
        """Queue a scancel for after the deciding transaction commits."""
        self._to_cancel.append(backend_id)

    async def flush_cancels(self) -> None:
        while self._to_cancel:
            await self.backend.cancel(self._to_cancel.pop(0))

    def notify(self) -> None:
        self.changed.set()
        self._news.set()
        self._news = asyncio.Event()  # one event per generation: no waiter clears another's

    def news(self) -> asyncio.Event:
        """An event set at the next change. Take it before reading the store."""
        return self._news

    @property
    def outputs(self) -> Path:
        return self.config.daemon.outputs

    # -- the pass ----------------------------------------------------------------------

    async def step(self) -> None:
        for sweep in await self.store.sweeps([SweepState.QUEUED]):
            await self.store.transition_sweep(sweep.id, SweepState.RUNNING, "sweep started",
                                              rule="engine.start")
            self.mark(sweep.id)
        jobs = await self.store.active_jobs()
        statuses = await self._poll(jobs)
        if statuses is None:
            await self.flush_cancels()
            return
        fresh = await self._read_logs(jobs, statuses)
        if any(j.state == JobState.SUBMITTING for j in jobs):
            fresh = await self.store.active_jobs()  # reconciled ones changed state meanwhile
        now = self.clock.now()
        for job in fresh:
            if job.state != JobState.SUBMITTING:
                await self._judge(job, statuses.get(job.backend_id or ""), now)
        await self.follower.retain({j.id for j in fresh})  # concluded ones were forgotten
        await self.flush_cancels()
        try:
            for sweep in await self._sweeps_to_advance():
                await self._advance_or_stop(sweep)
        except ControllerUnreachable as e:
            await self._controller_down(str(e))
        await self.flush_cancels()

    def mark(self, sweep_id: int) -> None:
        """Something happened in this sweep: plan it on the next pass."""
        if self._dirty is not None:
            self._dirty.add(sweep_id)

    async def _sweeps_to_advance(self) -> list[Sweep]:
        """Running sweeps with something new (all of them on a process's first pass), or a
        retry whose waiting period is over."""
        running = await self.store.sweeps([SweepState.RUNNING])
        due = await self.store.sweeps_with_due_retries(self.clock.now())
        dirty, self._dirty = self._dirty, set()
        return [s for s in running if dirty is None or s.id in dirty or s.id in due]

    async def _read_logs(self, jobs: Sequence[Job],
                         statuses: dict[str, JobStatus]) -> list[Job]:
        """Read every due log; store all the facts in one transaction. Returns the jobs as
        they now are in the store (the stored fields applied, no second query)."""
        now = self.clock.now()
        due = []
        for job in jobs:
            status = statuses.get(job.backend_id or "")
            finished = status is not None and status.state.finished
            tail = self._tail.setdefault(job.id, _TailClock())
            if job.state != JobState.SUBMITTING and (now >= tail.next_at or finished):
                due.append(job)
        chunks = await self.follower.read_chunks(due)
        written = [c for c in chunks if c is not None]
        await self.store.record_logs(written)
        by_job = {c.job_id: c.fields for c in written}
        base = self.config.policy.tail_interval_s
        for job, chunk in zip(due, chunks, strict=True):
            tail = self._tail[job.id]
            fresh = chunk is not None and "last_output_at" in chunk.fields
            tail.interval = base if fresh else min(max(tail.interval * 2, base),
                                                   self.config.policy.tail_backoff_max_s)
            tail.next_at = now + tail.interval
            if fresh:
                self.notify()
        return [replace(j, **by_job[j.id]) if j.id in by_job else j for j in jobs]

    async def _poll(self, jobs: Sequence[Job]) -> dict[str, JobStatus] | None:
        """Scheduler states in one call, when due. None: controller down (wait)."""
        now = self.clock.now()
        ids = [j.backend_id for j in jobs if j.backend_id]
        pending_submits = [j for j in jobs if j.state == JobState.SUBMITTING]
        log_says_done = any(j.summary_status for j in jobs)
        due = (now - self._last_poll >= self.config.policy.poll_interval_s or log_says_done
               or pending_submits or self._controller_down_since is not None)
        if not due:
            return {}
        try:
            statuses = await self.backend.poll(ids) if ids else {}
            for job in pending_submits:
                await self._reconcile_submitting(job)
        except ControllerUnreachable as e:
            await self._controller_down(str(e))
            return None
        self._last_poll = now
        if self._controller_down_since is not None:
            log.info("controller.back", down_s=now - self._controller_down_since)
            self._controller_down_since = None
        return statuses

    async def _controller_down(self, why: str) -> None:
        now = self.clock.now()
        if self._controller_down_since is None:
            self._controller_down_since = now
            for sweep in await self.store.sweeps([SweepState.RUNNING]):
                await self.store.add_event(sweep.id, "note", f"scheduler unreachable: {why}; "
                                           "waiting", rule="controller.wait", evidence=why)
        down = now - self._controller_down_since
        if down < self.config.policy.controller_down_limit_s:
            return
        for sweep in await self.store.sweeps([SweepState.RUNNING]):
            await stop_sweep(
                self, sweep, f"Slurm controller unreachable for {down / 60:.0f} min "
                f"(limit {self.config.policy.controller_down_limit_s / 60:.0f} min)",
                rule="controller.down_limit", evidence=why, failing_nodes=[],
                recovery="waited with backoff", outcome="controller still unreachable")
        self._controller_down_since = None

    # -- following jobs ----------------------------------------------------------------

    async def _judge(self, job: Job, status: JobStatus | None, now: float) -> None:
        """The job's state from the scheduler's word and its log: running, finished, hung."""
        if status is None:
            return await self._check_hang(job, now)
        if status.state != job.scheduler_state:
            await self.store.update_job(job.id, scheduler_state=str(status.state))
        if status.state == SchedulerState.RUNNING and job.state == JobState.QUEUED:
            await self.store.transition_job(job.id, JobState.RUNNING, "scheduler says RUNNING",
                                            rule="scheduler.running",
                                            last_output_at=job.last_output_at or now)
            return
        if status.state.finished:
            self._tail.pop(job.id, None)
            await self.follower.forget(job.id)
            await conclude(self, await self.store.job(job.id), status)
            self.mark(job.sweep_id)
            self.notify()
            return
        await self._check_hang(job, now)

    async def _check_hang(self, job: Job, now: float) -> None:
        if job.state == JobState.HUNG and job.backend_id:
            await self.backend.cancel(job.backend_id)  # idempotent: until the scheduler agrees
            return
        if job.state != JobState.RUNNING or job.last_output_at is None:
            return
        silent = now - job.last_output_at
        # Process start-up and machine load are not sped up on a simulated cluster: never
        # call a job hung on less than `hang_floor_wall_s` of real silence.
        limit = max(self.config.policy.hang_timeout_s,
                    self.config.daemon.hang_floor_wall_s / self.clock.scale)
        if silent < limit:
            return
        evidence = (f"no new log output for {silent:.0f} s (limit {limit:.0f} s) in phase "
                    f"{job.phase}, last step {job.last_step}")
        await self.store.transition_job(job.id, JobState.HUNG, "hung: cancelling",
                                        rule="hang.no_output", evidence=evidence)
        if job.backend_id:
            await self.backend.cancel(job.backend_id)

    # -- submitting --------------------------------------------------------------------

    async def _reconcile_submitting(self, job: Job) -> None:
        """A job row left in `submitting` by a crash: adopt the job if the scheduler has it,
        otherwise submit it now (the earlier sbatch never happened)."""
        found = await self.backend.find_by_token(job.token)
        if found is not None:
            await self.store.transition_job(
                job.id, JobState.QUEUED, f"found in the queue after a restart as "
                f"{found.backend_id}", rule="recovery.adopt", backend_id=found.backend_id,
                log_path=str(found.log_path), job_name=found.job_name,
                submitted_at=self.clock.now())
            return
        run = await self.store.run(job.run_id)
        sweep = await self.store.sweep(job.sweep_id)
        await self._submit(sweep, run, job)

    async def _advance_or_stop(self, sweep: Sweep) -> None:
        """A defect in planning one sweep stops that sweep for a person, with the error as
        evidence; it must not stop the daemon (a restart would meet it again, and every
        other sweep would wait)."""
        try:
            await self._advance(sweep)
        except ControllerUnreachable:
            raise
        except Exception as e:
            log.exception("sweep.plan_failed", sweep=sweep.id)
            if (await self.store.sweep(sweep.id)).state == SweepState.RUNNING:
                await stop_sweep(self, sweep, f"sweepd could not take the next step: {e}",
                                 rule="engine.plan_failed", evidence=repr(e), failing_nodes=[],
                                 recovery="none", outcome="a defect in sweepd; resume retries")

    async def _advance(self, sweep: Sweep) -> None:
        runs = await self.store.runs(sweep.id)
        jobs = await self.store.jobs(sweep.id)
        busy = {j.run_id for j in jobs if j.state in (JobState.SUBMITTING, JobState.QUEUED,
                                                       JobState.RUNNING, JobState.HUNG)}
        now = self.clock.now()
        for run in runs:
            if run.state in (RunState.PENDING, RunState.ACTIVE) and run.id not in busy and \
                    (run.not_before is None or run.not_before <= now):
                await self._start_attempt(sweep, run)
                if (await self.store.sweep(sweep.id)).state != SweepState.RUNNING:
                    return
        decision = await self._plan(sweep, runs)
        if isinstance(decision, Finished):
            await self._finish(sweep, decision)
            return
        if isinstance(decision, Stop):
            await stop_sweep(self, sweep, decision.reason, rule=decision.rule,
                             evidence=decision.evidence, failing_nodes=[], recovery="none",
                             outcome="stopped by the sweep's own rule")
            return
        for new in decision:
            run = await self.store.add_run(sweep.id, new.label, new.params,
                                           collect_nodes(list(new.nodes)), new.reason, new.rule)
            await self._start_attempt(sweep, run)

    async def _plan(self, sweep: Sweep, runs: list[Run]) -> Plan:
        spec = parse_spec(sweep.spec)
        kind = kind_of(sweep.kind)
        excluded = {e.node for e in await self.store.exclusions(sweep.id)}
        nodes = [n for n in spec.node_list if n not in excluded]
        prior = await self.store.prior_memstats(spec.model, spec.nodes)
        extra = await kind.gather(self.store, spec)
        # Stops a person already resumed from: the strategy must not raise them again.
        extra["acknowledged_stops"] = [
            e.rule for e in await self.store.events(sweep.id, kind="transition")
            if e.to_state == SweepState.AWAITING_DECISION and e.rule]
        ctx = SweepContext(runs=runs, nodes=nodes, prior_param_gb=prior,
                           gpu_memory_gib=self.config.cluster.gpu_memory_gib, extra=extra,
                           jobs=await self.store.jobs(sweep.id))
        return kind.plan(spec, ctx)

    async def _finish(self, sweep: Sweep, decision: Finished) -> None:
        to = SweepState.DONE if decision.ok else SweepState.FAILED
        await self.store.transition_sweep(sweep.id, to, decision.summary, rule="strategy.verdict",
                                          verdict=decision.verdict, progress=decision.summary)
        self.notify()

    async def _start_attempt(self, sweep: Sweep, run: Run) -> None:
        spec = parse_spec(sweep.spec)
        excluded = {e.node for e in await self.store.exclusions(sweep.id)}
        nodes = [n for n in spec.node_list if n in set(_expand(run.nodes)) and n not in excluded]
        need = min(spec.needed_nodes, len(_expand(run.nodes)))
        if len(nodes) < need:
            await stop_sweep(self, sweep, f"only {len(nodes)} usable nodes left; {spec.model} "
                             f"needs {need}", rule="nodes.below_minimum", evidence=None,
                             failing_nodes=sorted(excluded), recovery="node exclusion",
                             outcome="too few nodes")
            return
        if not await ensure_usable(self, sweep, nodes):
            return
        if run.state == RunState.PENDING:
            await self.store.transition_run(run.id, RunState.ACTIVE, "submitting",
                                            rule="engine.submit")
        token = f"sw{sweep.id}-{secrets.token_hex(4)}"
        job = await self.store.create_job(run, token, job_name="", nodes=collect_nodes(nodes))
        await self._submit(sweep, run, job)

    async def _workdir(self, sweep: Sweep, params: dict[str, Any]) -> tuple[bool, Path | None]:
        """(ok, where the run is submitted from); not ok: the sweep was stopped."""
        hook = kind_of(sweep.kind).workdir
        if hook is None:
            return True, None
        try:
            return True, await hook(parse_spec(sweep.spec), params,
                                    self.outputs / f"sweep-{sweep.id}")
        except GitError as e:
            await stop_sweep(self, sweep, f"cannot check out {params.get('_commit')}: {e}",
                             rule="worktree.failed", evidence=str(e), failing_nodes=[],
                             recovery="none", outcome="no worktree, nothing submitted")
            return False, None

    async def _submit(self, sweep: Sweep, run: Run, job: Job) -> None:
        spec = parse_spec(sweep.spec)
        overrides = {k: str(v) for k, v in spec.overrides.items()}
        overrides.setdefault("steps", str(spec.steps))
        # Run params starting with `_` steer the submission; the rest are overrides.
        overrides.update({k: str(v) for k, v in run.params.items() if not k.startswith("_")})
        params = run.params
        # A swept `_env_K` (e.g. XLA_PYTHON_CLIENT_MEM_FRACTION) is an environment variable.
        env = {**spec.env, **{k[5:]: str(v) for k, v in params.items() if k.startswith("_env_")}}
        ok, workdir = await self._workdir(sweep, params)
        if not ok:
            return
        request = JobRequest(token=job.token, model=str(params.get("_model", spec.model)),
                             nodes=_expand(job.nodes),
                             output_dir=self.outputs / f"sweep-{sweep.id}",
                             overrides=overrides, env=env,
                             alias=params.get("_alias"), tag=params.get("_tag"),
                             commit=params.get("_commit"), workdir=workdir)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        try:
            sub = await self.backend.submit(request)
        except SubmitRefused as e:
            await self.store.transition_job(job.id, JobState.FAILED, f"submission refused: {e}",
                                            rule="submit.refused", evidence=str(e))
            await stop_sweep(self, sweep, f"submission refused: {e}", rule="submit.refused",
                             evidence=str(e), failing_nodes=[], recovery="none",
                             outcome="refused before submitting")
            return
        await self.store.transition_job(
            job.id, JobState.QUEUED, f"submitted as job {sub.backend_id}", rule="engine.submit",
            backend_id=sub.backend_id, log_path=str(sub.log_path), job_name=sub.job_name,
            submitted_at=self.clock.now(), profiler=int(spec.profiler))
        self.notify()


def _expand(nodes: str) -> list[str]:
    from sweepd.specs import expand_nodes

    return expand_nodes(nodes)
