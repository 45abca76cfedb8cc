"""Drives every sweep: submits, follows jobs, applies the policy, asks the strategy.

One pass (`step`) at a time; each pass reads the facts it needs from the store and writes
every decision back before acting on it (write-ahead), so a crash at any point is
recovered by the next pass of a new process.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from sweepd.clusters.base import (
    ClusterBackend,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    SchedulerState,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.submitguard import GuardHeld, end_group, guard_path, holder
from sweepd.config import Config
from sweepd.core.conclude import conclude
from sweepd.core.control import (
    SPEC_REFUSED,
    end_note,
    end_open_work,
    release,
    release_ended,
    stop_sweep,
)
from sweepd.core.follow import LogFollower
from sweepd.core.metrics import observe_stored
from sweepd.core.node_check import ensure_usable
from sweepd.core.queued_check import check_queued
from sweepd.core.states import JobState, RunState, SweepState
from sweepd.kinds.api import Finished, GatherError, Plan, Stop, SweepContext
from sweepd.kinds.registry import gather_context, kind_of, stored_spec
from sweepd.kinds.spec import SweepSpec
from sweepd.monitor.tail import is_lost
from sweepd.store.rows import Job, Run, RunParams, Sweep
from sweepd.store.store import InvalidTransition, NotFound, Store
from sweepd.util.clock import Clock
from sweepd.util.hostlists import collect_nodes
from sweepd.util.worktrees import GitError

log = structlog.get_logger("sweepd.core.engine")

CONTROLLER_DOWN_KEY = "controller_down_since"
# Wall seconds past a submitting command's own timeout before its attempt counts as over.
SUBMIT_MARGIN_S = 5.0
_TOKEN_SWEEP = re.compile(r"^sw(\d+)-")
# A pass gives the event loop a turn (the socket's requests, a stop signal) at least every
# this many jobs or sweeps, and every this many seconds of work: a pass over thousands of
# jobs (a restart's backlog) otherwise holds both until it ends.
YIELD_EVERY = 100
YIELD_S = 0.05
# Wall seconds of planning per pass: sweeps left when it is spent are planned by the next
# pass, in the same order (their jobs are read and judged in between).
PLAN_BUDGET_S = 0.5


class PassStopped(BaseException):
    """A stop request ended the pass between two jobs or sweeps. A BaseException, like a
    cancellation: no `except Exception` on the way (a sweep's planning) may take it for a
    defect."""


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
    # The last successful answer from the scheduler: an outage is measured from it.
    _last_contact: float | None = field(default=None, init=False)
    _told_down: set[int] = field(default_factory=set, init=False)
    _outage_loaded: bool = field(default=False, init=False)
    # Jobs whose log said "done": polled once at once, then at the normal cadence.
    _early_polled: set[int] = field(default_factory=set, init=False)
    # Until when each poll also looks for duplicate submissions (None: at the first poll).
    _stray_until: float | None = field(default=None, init=False)
    _store_id: str | None = field(default=None, init=False)
    # Write-ahead jobs whose earlier submitter is still running: told once, ended once.
    _waiting: set[int] = field(default_factory=set, init=False)
    _ended: set[int] = field(default_factory=set, init=False)
    # `changed` wakes the engine loop for a pass at once (a submit, a resume, a finished
    # job: `wake`, `mark`); `news` wakes clients waiting for progress (separate, so a
    # waiting client never delays the engine, and news alone costs no extra pass).
    changed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # True from a pass's start until it takes its marks: a mark then is this pass's own.
    _planning: bool = field(default=False, init=False)
    _news: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _to_cancel: list[str] = field(default_factory=list, init=False)
    # Sweeps to plan on the next pass; None: all (a new process knows nothing yet).
    _dirty: set[int] | None = field(default=None, init=False)
    # Each sweep's spec, parsed once from the store (as accepted: see `stored_spec`).
    _specs: dict[int, SweepSpec] = field(default_factory=dict, init=False)
    # The daemon's stop request: set, it ends a pass at its next checkpoint.
    stopping: asyncio.Event | None = field(default=None, init=False)
    _since_yield: int = field(default=0, init=False)
    _yielded_at: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.follower = LogFollower(self.store, self.clock, self.hang_limit())

    def hang_limit(self) -> float:
        """Silence (cluster seconds) after which a running job is hung. Process start-up
        and machine load are not sped up on a simulated cluster: never less than
        `hang_floor_wall_s` of real time."""
        return max(self.config.policy.hang_timeout_s,
                   self.config.daemon.hang_floor_wall_s / self.clock.scale)

    async def close(self) -> None:
        await self.follower.retain(set())

    def cancel_later(self, backend_id: str) -> None:
        """Queue a scancel for after the deciding transaction commits."""
        self._to_cancel.append(backend_id)

    async def flush_cancels(self) -> None:
        """Send the queued scancels, once each; with the controller away, they wait for it.
        The pass and a person's abort over the socket may flush at the same time: each
        takes its cancel off the queue before awaiting the scheduler, so none goes twice."""
        while self._to_cancel:
            backend_id = self._to_cancel.pop(0)
            try:
                await self.backend.cancel(backend_id)
            except ControllerUnreachable as e:
                self._to_cancel.insert(0, backend_id)
                await self._controller_down(str(e))
                return

    def wake(self) -> None:
        """Run the next pass at once, not at the next tick."""
        self.changed.set()

    def notify(self) -> None:
        """News for the clients waiting for progress."""
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
        """One pass. A change from here on (a submit, a resume) wakes the loop for the next
        one; a mark before this pass plans is planned by this pass."""
        self.changed.clear()
        self._planning = True
        self._since_yield, self._yielded_at = 0, time.monotonic()
        try:
            await self._pass()
        except PassStopped:
            # What the pass had not reached is the next pass's: every sweep planned again
            # (as by a new process), every log read again from its stored offset.
            self._dirty = None
            await self.follower.retain(set())
            log.info("pass.stopped")
        finally:
            self._planning = False

    def stop_requested(self) -> bool:
        return self.stopping is not None and self.stopping.is_set()

    async def checkpoint(self) -> None:
        """Between two jobs or sweeps of a pass: give the event loop a turn now and then
        (the socket answers during a long pass), and end the pass on a stop request. Every
        job or sweep is handled whole or not at all: what is left is the next pass's (a
        new process's)."""
        self._since_yield += 1
        if self._since_yield >= YIELD_EVERY or time.monotonic() - self._yielded_at >= YIELD_S:
            self._since_yield = 0
            await asyncio.sleep(0)
            self._yielded_at = time.monotonic()
        if self.stop_requested():
            raise PassStopped

    async def _pass(self) -> None:
        if self._dirty is None:   # a new process: a crash may have come between an end and
            await release_ended(self)   # its clean-up
        for sweep in await self.store.sweeps([SweepState.QUEUED]):
            with _superseded("sweep", sweep.id):
                await self.store.transition_sweep(sweep.id, SweepState.RUNNING,
                                                  "sweep started", rule="engine.start")
                self.mark(sweep.id)
        jobs = await self.store.active_jobs()
        await self.checkpoint()   # a stop that came while thousands of rows were read
        statuses = await self._poll(jobs)
        if statuses is None:
            return
        await self.checkpoint()
        await self._read_logs(jobs, statuses)
        # The jobs as they now are: the logs' facts applied (the store keeps the rows and
        # applies what it wrote), reconciled ones in their new state. Not a second full
        # read: only rows written some other way are read again.
        fresh = await self.store.active_jobs()
        now = self.clock.now()
        for job in fresh:
            await self.checkpoint()
            # A stop earlier in this pass may have cancelled the job: no longer ours to judge.
            if job.state != JobState.SUBMITTING and job.backend_id not in self._to_cancel:
                try:   # `_superseded`, inline: per job and pass, a context manager costs
                    await self._judge(job, statuses.get(job.backend_id or ""), now)
                except InvalidTransition as e:
                    _log_superseded("job", job.id, e)
        await self.follower.retain({j.id for j in fresh})  # concluded ones were forgotten
        await self.flush_cancels()
        try:
            sweeps = await self._sweeps_to_advance()
            began = time.monotonic()
            for i, sweep in enumerate(sweeps):
                if i and time.monotonic() - began >= PLAN_BUDGET_S:
                    # The rest is the next pass's, at once: a new process plans every running
                    # sweep, and its first pass would otherwise last as long as all of them.
                    self._dirty = (self._dirty or set()) | {s.id for s in sweeps[i:]}
                    self.wake()
                    break
                await self.checkpoint()
                await self._advance_or_stop(sweep)
        except ControllerUnreachable as e:
            await self._controller_down(str(e))
        await self.flush_cancels()

    def spec_of(self, sweep: Sweep) -> SweepSpec:
        """The sweep's spec as it was accepted, parsed on first use and kept."""
        if sweep.id not in self._specs:
            self._specs[sweep.id] = stored_spec(sweep.kind, sweep.spec)
        return self._specs[sweep.id]

    def mark(self, sweep_id: int) -> None:
        """Something happened in this sweep: plan it (this pass if it has not planned yet,
        else the next one, at once)."""
        if self._dirty is not None:
            self._dirty.add(sweep_id)
        if not self._planning:
            self.wake()

    async def _sweeps_to_advance(self) -> list[Sweep]:
        """Running sweeps with something new (all of them on a process's first pass), or a
        retry whose waiting period is over."""
        due = await self.store.sweeps_with_due_retries(self.clock.now())
        dirty, self._dirty = self._dirty, set()
        self._planning = False
        if dirty is not None and not dirty and not due:
            return []   # nothing new: the running sweeps are not even read
        running = await self.store.sweeps([SweepState.RUNNING])
        return [s for s in running if dirty is None or s.id in dirty or s.id in due]

    async def _read_logs(self, jobs: Sequence[Job], statuses: dict[str, JobStatus]) -> None:
        """Read every due log; store all the facts in one transaction."""
        now = self.clock.now()
        due = []
        for job in jobs:
            status = statuses.get(job.backend_id or "")
            finished = status is not None and status.state.finished
            tail = self._tail.get(job.id)
            if tail is None:
                tail = self._tail[job.id] = _TailClock()
            if job.state != JobState.SUBMITTING and (now >= tail.next_at or finished):
                due.append(job)
        chunks = await self.follower.read_chunks(due, self.checkpoint, self.stop_requested)
        written = [c for c in chunks if c is not None]
        await self.store.record_logs(written)
        observe_stored(written)   # line -> stored latency, for /metrics
        base, most = self.config.policy.tail_interval_s, self.config.policy.tail_backoff_max_s
        news = False
        for job, chunk in zip(due, chunks, strict=True):
            tail = self._tail[job.id]
            fresh = chunk is not None and "last_output_at" in chunk.fields
            tail.interval = base if fresh else min(max(tail.interval * 2, base), most)
            tail.next_at = now + tail.interval
            news = news or fresh
        if news:   # once: a waiting client wakes at the first, and nothing runs in between
            self.notify()

    async def _poll(self, jobs: Sequence[Job]) -> dict[str, JobStatus] | None:
        """Scheduler states in one call, when due. None: controller down (wait)."""
        await self._load_outage()
        now = self.clock.now()
        ids = [j.backend_id for j in jobs if j.backend_id]
        submitting = [j for j in jobs if j.state == JobState.SUBMITTING]
        down = self._controller_down_since is not None
        # A job whose log says it is done is polled once at once, not at every pass (its
        # scheduler state may stay COMPLETING for a while).
        self._early_polled &= {j.id for j in jobs}
        early = {j.id for j in jobs if j.summary_status} - self._early_polled
        due = now - self._last_poll >= self.config.policy.poll_interval_s or (
            bool(early) and not down)
        if not due and (down or not submitting):
            return None if down else {}
        try:
            statuses = await self.backend.poll(ids) if ids and due else {}
            for job in submitting:
                await self._reconcile_submitting(job, now)
            asked = bool(ids and due) or bool(submitting)
            if due and (not asked or self._stray_until is None or now <= self._stray_until):
                await self._check_strays(now)   # also the probe while the controller is away
                asked = True
        except ControllerUnreachable as e:
            self._last_poll = now   # the next try at the normal cadence
            await self._controller_down(str(e))
            return None
        if due:
            self._last_poll = now
            self._early_polled |= early
        if asked:   # the answer came now, not when the call began (it may have waited)
            await self._contact(self.clock.now())
        return statuses

    async def _load_outage(self) -> None:
        """An outage an earlier process saw begin goes on counting from its start (the
        limit too), and whom it told is told when it ends."""
        if self._outage_loaded:
            return
        self._outage_loaded = True
        saved = await self.store.daemon_value(CONTROLLER_DOWN_KEY)
        if saved is not None:
            outage = json.loads(saved)
            self._controller_down_since = float(outage["since"])
            self._told_down = {int(i) for i in outage["told"]}

    async def _contact(self, now: float) -> None:
        self._last_contact = now
        if self._controller_down_since is None:
            return
        down = now - self._controller_down_since
        log.warning("controller.back", down_s=round(down, 1))
        for sweep_id in sorted(self._told_down):
            sweep = await self.store.sweep(sweep_id)
            if sweep.state not in (SweepState.RUNNING, SweepState.AWAITING_DECISION):
                continue
            async with self.store.tx():
                await self.store.add_event(sweep_id, "note", f"scheduler answers again after "
                                           f"{down:.0f} s", rule="controller.back",
                                           evidence=f"down_s: {down:.0f}")
                await self.store.add_event(sweep_id, "progress", f"sweep {sweep_id}: the Slurm "
                                           f"controller answers again (away {down:.0f} s)")
        self._controller_down_since = None
        self._told_down = set()
        await self.store.set_daemon_value(CONTROLLER_DOWN_KEY, None)
        self.notify()

    async def _controller_down(self, why: str) -> None:
        """The outage runs from the last successful answer, not from the first failed one:
        that is when the scheduler may have stopped hearing us."""
        await self._load_outage()
        now = self.clock.now()
        limit = self.config.policy.controller_down_limit_s
        if self._controller_down_since is None:
            since = self._last_contact if self._last_contact is not None else now
            self._controller_down_since = since
            log.warning("controller.gone", why=why, since_s=round(now - since, 1))
            for sweep in await self.store.sweeps([SweepState.RUNNING]):
                async with self.store.tx():
                    await self.store.add_event(sweep.id, "note", f"scheduler unreachable: {why}; "
                                               "waiting", rule="controller.wait", evidence=why)
                    await self.store.add_event(
                        sweep.id, "progress", f"sweep {sweep.id}: the Slurm controller does not "
                        f"answer (last answer {now - since:.0f} s ago): waiting up to "
                        f"{limit / 60:.0f} min")
                self._told_down.add(sweep.id)
            await self.store.set_daemon_value(CONTROLLER_DOWN_KEY, json.dumps(
                {"since": since, "told": sorted(self._told_down)}))
            self.notify()
        down = now - self._controller_down_since
        if down < limit:
            return
        for sweep in await self.store.sweeps([SweepState.RUNNING]):
            await stop_sweep(
                self, sweep, f"Slurm controller unreachable for {down / 60:.0f} min "
                f"(limit {limit / 60:.0f} min)",
                rule="controller.down_limit", evidence=why, failing_nodes=[],
                recovery="waited, asking again at the poll period",
                outcome="controller still unreachable")

    # -- following jobs ----------------------------------------------------------------

    async def _judge(self, job: Job, status: JobStatus | None, now: float) -> None:
        """The job's state from the scheduler's word and its log: running, finished, hung."""
        if status is not None and status.state != job.scheduler_state:
            await self.store.update_job(job.id, scheduler_state=str(status.state))
        if status is not None and status.state.finished:
            if self.follower.behind(job.id):   # the rest of its log first: the next pass
                self.wake()
                return
            self._tail.pop(job.id, None)
            await self.follower.forget(job.id)
            ended = await self.store.job(job.id)
            if ended.state == JobState.QUEUED and ended.last_output_at is not None:
                # It ran unwatched (the daemon was down, or its whole run fell between two
                # passes): its log says it ran, so the trail says so as a watched run's does
                # and a restart leaves the same events as an uninterrupted sweep.
                await self._maybe_running(ended, None, now)
                ended = await self.store.job(job.id)
            await conclude(self, ended, status)
            self.mark(job.sweep_id)
            self.notify()
            return
        if job.state == JobState.QUEUED:
            if not await check_queued(self, job, status):   # pending on a dead node?
                await self._maybe_running(job, status, now)
            return
        await self._check_hang(job, now)

    async def _maybe_running(self, job: Job, status: JobStatus | None, now: float) -> None:
        """RUNNING on the scheduler's word or on the job's first log output, whichever comes
        first: the hang clock starts then, not at the next poll."""
        if status is not None and status.state == SchedulerState.RUNNING:
            await self.store.transition_job(job.id, JobState.RUNNING, "scheduler says RUNNING",
                                            rule="scheduler.running",
                                            last_output_at=job.last_output_at or now)
        elif job.last_output_at is not None:
            first = await asyncio.to_thread(_first_line, job.log_path)
            await self.store.transition_job(
                job.id, JobState.RUNNING, "its log has output: the job runs",
                rule="log.first_output", evidence=f"{job.log_path}: {first}",
                last_output_at=job.last_output_at)
            self.notify()

    async def _check_hang(self, job: Job, now: float) -> None:
        # A hung job was cancelled once when it was called hung; from then on the
        # scheduler's answer (at the poll period) says when it has ended.
        if job.state != JobState.RUNNING or job.last_output_at is None:
            return
        # Silence in a log that cannot be read, or was never seen, was never observed; the
        # follower marks a log still not there after the hang limit lost.
        if is_lost(job.log_identity) or (job.log_path and job.log_identity is None):
            return
        if job.summary_status is not None:
            return   # its log says it ended: the scheduler's word on its end follows
        silent = now - job.last_output_at
        limit = self.hang_limit()
        if silent < limit:
            return
        evidence = (f"no new log output for {silent:.0f} s (limit {limit:.0f} s) in phase "
                    f"{job.phase}, last step {job.last_step}")
        await self.store.transition_job(job.id, JobState.HUNG, "hung: cancelling",
                                        rule="hang.no_output", evidence=evidence)
        if job.backend_id:
            self.cancel_later(job.backend_id)

    # -- submitting --------------------------------------------------------------------

    async def _reconcile_submitting(self, job: Job, now: float) -> None:
        """A job row left in `submitting` by a crash (or a failed call). While the earlier
        submitter may still put the job in the queue, wait; then a last lookup by token
        adopts the job, and only when it is not there is the job submitted again."""
        self._watch_strays((job.submit_deadline or now) + SUBMIT_MARGIN_S / self.clock.scale)
        guard = guard_path(self.outputs / f"sweep-{job.sweep_id}", job.token)
        pgid = await asyncio.to_thread(holder, guard)
        if pgid is not None:
            await self._await_submitter(job, pgid, now)
            return
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

    async def _await_submitter(self, job: Job, pgid: int, now: float) -> None:
        """An earlier process's sbatch (or submit.sh) still runs: its job may yet appear."""
        if job.submit_deadline is not None and now >= job.submit_deadline:
            if job.id not in self._ended:
                self._ended.add(job.id)
                await self.store.add_event(
                    job.sweep_id, "note", "the earlier submission outlived its deadline: "
                    "ended", rule="recovery.submitter_ended", job_id=job.id, run_id=job.run_id,
                    evidence=f"process group {pgid} still running at the deadline")
            end_group(pgid)
            return
        if job.id not in self._waiting:
            self._waiting.add(job.id)
            await self.store.add_event(
                job.sweep_id, "note", "an earlier submission of this job is still running: "
                "waiting for it before looking the token up", rule="recovery.wait_submitter",
                job_id=job.id, run_id=job.run_id,
                evidence=f"process group {pgid or '?'} holds {job.token}'s submit guard")

    def _watch_strays(self, until: float) -> None:
        self._stray_until = max(self._stray_until or 0.0, until)

    async def _new_token(self, sweep_id: int) -> str:
        if self._store_id is None:
            self._store_id = await self.store.store_id()
        return f"sw{sweep_id}-{secrets.token_hex(4)}.{self._store_id}"

    async def _check_strays(self, now: float) -> None:
        """Cancel and report every job in the queue that carries a token of this store but
        is not the job that token's row follows: a duplicate of a submission a crash left
        open, or one no row knows. Tokens of other stores are never touched."""
        first = self._stray_until is None
        if first:
            self._stray_until = now   # the first check of this process is this one
        if self._store_id is None:
            self._store_id = await self.store.store_id()
        live = await self.backend.live_tokens()
        rows = await self.store.jobs_by_tokens(live.values())
        for backend_id, token in sorted(live.items()):
            row = rows.get(token)
            if row is None and token.endswith(f".{self._store_id}"):
                await self._cancel_stray(backend_id, token, None,
                                         f"job {backend_id} carries token {token} of this "
                                         "sweepd, which has no job with it")
            elif row is not None and row.backend_id not in (None, backend_id):
                await self._cancel_stray(backend_id, token, row,
                                         f"job {backend_id} carries token {token}, whose "
                                         f"job is scheduler job {row.backend_id}")
            elif first and row is not None and row.state == JobState.CANCELLED:
                # Cancelled in the store, its scancel lost with an earlier process (a crash,
                # or an outage before a `sweepd run` ended): send it again, once.
                log.warning("job.cancel_resent", backend_id=backend_id, job=row.id)
                self.cancel_later(backend_id)

    async def _cancel_stray(self, backend_id: str, token: str, row: Job | None,
                            why: str) -> None:
        log.warning("job.duplicate_cancelled", backend_id=backend_id, token=token, why=why)
        sweep_id = row.sweep_id if row else _sweep_of_token(token)
        try:
            sweep = await self.store.sweep(sweep_id) if sweep_id is not None else None
        except NotFound:
            sweep = None
        if sweep is not None:
            async with self.store.tx():
                await self.store.add_event(
                    sweep.id, "decision", f"cancel scheduler job {backend_id}: a duplicate "
                    "submission", rule="recovery.duplicate_cancelled", evidence=why,
                    job_id=row.id if row else None, run_id=row.run_id if row else None)
                await self.store.add_event(
                    sweep.id, "progress", f"sweep {sweep.id}: cancelled Slurm job {backend_id}, "
                    f"a duplicate submission ({why})")
            self.notify()
        await self.backend.cancel(backend_id)

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
            for line in new.progress:
                await self.store.add_event(sweep.id, "progress", line, run_id=run.id)
            await self._start_attempt(sweep, run)

    async def _plan(self, sweep: Sweep, runs: list[Run]) -> Plan:
        spec = self.spec_of(sweep)
        kind = kind_of(sweep.kind)
        excluded = {e.node for e in await self.store.exclusions(sweep.id)}
        nodes = [n for n in spec.node_list if n not in excluded]
        try:
            facts = await kind.gather(self.store, spec, gather_context(self.config))
        except GatherError as e:   # what it refers to is gone since it was accepted
            return Finished(False, f"{kind.name} cannot plan: {e}", {"error": str(e)})
        # Stops a person already resumed from: the strategy must not raise them again.
        acknowledged = [e.rule for e in await self.store.events(sweep.id, kind="transition")
                        if e.to_state == SweepState.AWAITING_DECISION and e.rule]
        ctx = SweepContext(runs=runs, nodes=nodes,
                           gpu_memory_gib=self.config.cluster.gpu_memory_gib, facts=facts,
                           jobs=await self.store.jobs(sweep.id), acknowledged_stops=acknowledged,
                           gpus_per_node=self.config.cluster.gpus_per_node)
        return kind.plan(spec, ctx)

    async def _finish(self, sweep: Sweep, decision: Finished) -> None:
        to = SweepState.DONE if decision.ok else SweepState.FAILED
        async with self.store.tx():
            # A verdict reached with runs still open (e.g. a time budget spent mid-wave):
            # their jobs would otherwise run on, and hold the nodes, for nobody.
            await end_open_work(self, sweep.id, "not needed: the sweep reached its verdict",
                                "strategy.verdict")
            note = await end_note(self, sweep)
            await self.store.transition_sweep(sweep.id, to, decision.summary,
                                              rule="strategy.verdict", verdict=decision.verdict,
                                              progress=decision.summary
                                              + (f"\n\n{note}" if note else ""))
        await self.flush_cancels()
        await release(self, sweep)
        self.notify()

    async def _start_attempt(self, sweep: Sweep, run: Run) -> None:
        spec = self.spec_of(sweep)
        excluded = {e.node for e in await self.store.exclusions(sweep.id)}
        nodes = [n for n in spec.node_list if n in set(_expand(run.nodes)) and n not in excluded]
        need = min(spec.needed_nodes, len(_expand(run.nodes)))
        if len(nodes) < need:
            left = f"{len(nodes)} usable node{'' if len(nodes) == 1 else 's'}"
            await stop_sweep(self, sweep, f"only {left} left; the sweep's min_nodes is "
                             f"{need}", rule="nodes.below_minimum", evidence=None,
                             failing_nodes=sorted(excluded), recovery="node exclusion",
                             outcome="too few nodes")
            return
        if not await ensure_usable(self, sweep, nodes):
            return
        if run.state == RunState.PENDING:
            await self.store.transition_run(run.id, RunState.ACTIVE, "submitting",
                                            rule="engine.submit")
        token = await self._new_token(sweep.id)
        job = await self.store.create_job(run, token, job_name="", nodes=collect_nodes(nodes))
        await self._submit(sweep, run, job)

    async def _workdir(self, sweep: Sweep, params: RunParams) -> tuple[bool, Path | None]:
        """(ok, where the run is submitted from); not ok: the sweep was stopped."""
        hook = kind_of(sweep.kind).workspace.workdir
        if hook is None:
            return True, None
        try:
            return True, await hook(self.spec_of(sweep), params,
                                    self.outputs / f"sweep-{sweep.id}")
        except GitError as e:
            await stop_sweep(self, sweep, f"cannot check out {params.commit}: {e}",
                             rule="worktree.failed", evidence=str(e), failing_nodes=[],
                             recovery="none", outcome="no worktree, nothing submitted")
            return False, None

    async def _submit(self, sweep: Sweep, run: Run, job: Job) -> None:
        spec = self.spec_of(sweep)
        params = run.params
        ok, workdir = await self._workdir(sweep, params)
        if not ok:
            return
        request = job_request(spec, params, token=job.token, nodes=_expand(job.nodes),
                              output_dir=self.outputs / f"sweep-{sweep.id}", workdir=workdir)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        # Write-ahead: until this deadline a crash leaves the attempt open (reconcile).
        deadline = (self.clock.now()
                    + (self.backend.submit_timeout_s + SUBMIT_MARGIN_S) / self.clock.scale)
        await self.store.update_job(job.id, submit_deadline=deadline)
        try:
            sub = await self.backend.submit(request)
        except GuardHeld as e:   # an earlier attempt still runs: the next pass waits for it
            log.warning("submit.still_in_flight", job=job.id, error=str(e))
            return
        except SubmitRefused as e:
            # A refusal the spec causes repeats on every resume: its own rule, so that the
            # stop message and `resume` say so (core/control.py).
            rule = SPEC_REFUSED if isinstance(e, SpecRefused) else "submit.refused"
            await self.store.transition_job(job.id, JobState.FAILED, f"submission refused: {e}",
                                            rule=rule, evidence=str(e))
            await stop_sweep(self, sweep, f"submission refused: {e}", rule=rule,
                             evidence=str(e), failing_nodes=[], recovery="none",
                             outcome="refused before submitting")
            return
        try:
            await self.store.transition_job(
                job.id, JobState.QUEUED, f"submitted as job {sub.backend_id}"
                + (f" ({sub.note})" if sub.note else ""),
                rule="submit.adopted" if sub.note else "engine.submit", evidence=sub.note,
                backend_id=sub.backend_id, log_path=str(sub.log_path), job_name=sub.job_name,
                submitted_at=self.clock.now(), profiler=int(spec.profiler))
        except InvalidTransition:
            await self._cancel_late(sweep, job, sub)
        for said, rule in ((sub.prepared, "submit.prepared"), (sub.name_note, "submit.name_fit")):
            if said:
                await self.store.add_event(sweep.id, "decision", said, rule=rule,
                                           run_id=run.id, job_id=job.id,
                                           evidence=f"token {job.token}")
        self.notify()

    async def _cancel_late(self, sweep: Sweep, job: Job, sub: Submitted) -> None:
        """The row was ended while its submission was in flight (an abort or a cancel over
        the socket): the job the scheduler made is nobody's, so it is cancelled, on record."""
        await self.store.update_job(job.id, backend_id=sub.backend_id,
                                    log_path=str(sub.log_path), job_name=sub.job_name)
        await self.store.add_event(
            sweep.id, "decision", f"job {sub.backend_id} was submitted while its row was "
            "being ended: cancelled", rule="submit.late_cancel", run_id=job.run_id,
            job_id=job.id, evidence=f"token {job.token}")
        await self.backend.cancel(sub.backend_id)


@contextmanager
def _superseded(what: str, row_id: int) -> Iterator[None]:
    """A person's abort, stop or cancel over the socket runs while the pass awaits the
    scheduler or a log: a row the pass read may have ended meanwhile, and the guarded
    UPDATE refuses the stale transition. The person's word stands; the next pass reads the
    row as it now is. (Uncaught, the refusal would end the pass, and with it the daemon.)"""
    try:
        yield
    except InvalidTransition as e:
        _log_superseded(what, row_id, e)


def _log_superseded(what: str, row_id: int, e: InvalidTransition) -> None:
    log.warning("pass.superseded", row=what, id=row_id, error=str(e))


def job_request(spec: SweepSpec, params: RunParams, *, token: str, nodes: list[str],
                output_dir: Path, workdir: Path | None = None) -> JobRequest:
    """What the backend is asked to submit for a run (also what `validate` names)."""
    # The run's own overrides and env (the swept parameter among them) win over the spec's.
    overrides = {k: str(v) for k, v in spec.overrides.items()}
    overrides.setdefault("steps", str(spec.steps))
    overrides.update({k: str(v) for k, v in params.overrides.items()})
    return JobRequest(token=token, model=params.model or spec.model, nodes=nodes,
                      output_dir=output_dir, overrides=overrides,
                      env={**spec.env, **params.env}, xla_flags=params.xla_flags,
                      profile=params.profile, profile_env=_profile_env(spec.env, params),
                      alias=params.alias, tag=params.tag, commit=params.commit,
                      workdir=workdir, partition=getattr(spec, "partition", None),
                      time_limit=params.time_limit)


def _profile_env(spec_env: Mapping[str, str], params: RunParams) -> dict[str, str]:
    """A profile's own env vars: the run's env beyond the spec's (the XLA tuning kind's
    params carry the spec's env too); none for a run without a profile."""
    if params.profile is None:
        return {}
    return {k: v for k, v in params.env.items() if spec_env.get(k) != v}


def _sweep_of_token(token: str) -> int | None:
    found = _TOKEN_SWEEP.match(token)
    return int(found.group(1)) if found else None


def _first_line(path: str | None) -> str:
    """The log's first line, as the evidence that the job runs (best effort)."""
    if not path:
        return "?"
    try:
        with open(path, "rb") as f:
            return f.readline(300).decode(errors="replace").strip() or "(output)"
    except OSError as e:
        return f"(unreadable: {e.strerror})"


def _expand(nodes: str) -> list[str]:
    from sweepd.util.hostlists import expand_nodes

    return expand_nodes(nodes)
