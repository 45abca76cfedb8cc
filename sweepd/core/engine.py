"""Drives every sweep: submits, follows jobs, applies the policy, asks the strategy.

One pass (`step`) at a time; each pass reads the facts it needs from the store and writes
every decision back before acting on it (write-ahead), so a crash at any point is
recovered by the next pass of a new process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from sweepd.clusters.base import ClusterBackend, ControllerUnreachable, JobStatus
from sweepd.config import Config
from sweepd.core import planning
from sweepd.core.children import due_parents
from sweepd.core.control import release_ended, stop_sweep
from sweepd.core.cost_cap import AppliedCap, applied_cap
from sweepd.core.follow import LogFollower
from sweepd.core.gathered import Gathered
from sweepd.core.judge import judge, nothing_to_judge
from sweepd.core.logpass import TailClocks, read_logs
from sweepd.core.outage import ControllerOutage
from sweepd.core.poll import PollClock, controller_down, poll
from sweepd.core.strays import Strays
from sweepd.core.submit import Submitter
from sweepd.kinds.parse import stored_spec
from sweepd.kinds.spec import SweepSpec
from sweepd.store.rows import Job, Sweep
from sweepd.store.states import JobState, SweepState
from sweepd.store.store import InvalidTransition, Store
from sweepd.util.clock import Clock
from sweepd.util.load import crowding

log = structlog.get_logger("sweepd.core.engine")

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
class Engine:
    store: Store
    backend: ClusterBackend
    clock: Clock
    config: Config
    follower: LogFollower = field(init=False)
    # When each job's log is next due, and when the scheduler was last asked.
    tail_clocks: TailClocks = field(default_factory=TailClocks, init=False)
    poll_clock: PollClock = field(default_factory=PollClock, init=False)
    # The pieces the pass composes: each does one job, and returns what it asks of the
    # engine (scancels, stops, news) for the engine to do.
    outage: ControllerOutage = field(init=False)
    strays: Strays = field(init=False)
    submitter: Submitter = field(init=False)
    # A submission's gather, kept for the sweep's first plan (`core/gathered.py`).
    gathered: Gathered = field(default_factory=Gathered, init=False)
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
    _caps: dict[int, AppliedCap] = field(default_factory=dict, init=False)
    # The daemon's stop request: set, it ends a pass at its next checkpoint.
    stopping: asyncio.Event | None = field(default=None, init=False)
    _since_yield: int = field(default=0, init=False)
    _yielded_at: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.follower = LogFollower(self.store, self.clock, self.log_appear_limit())
        self.outage = ControllerOutage(self.store, self.clock,
                                       self.config.policy.controller_down_limit_s)
        self.strays = Strays(self.store, self.backend)
        self.submitter = Submitter(self.store, self.backend, self.clock, self.outputs,
                                   self.strays, self.spec_of, self.cap_of)

    def hang_limit(self) -> float:
        """Silence (cluster seconds) after which a running job is hung. Process start-up
        and machine load are not sped up on a simulated cluster: never less than
        `hang_floor_wall_s` of real time, stretched when the CPUs are crowded (at load
        10 on 2 cores a simulated job's start outlasted the 3 s floor and was retried)."""
        floor_wall = self.config.daemon.hang_floor_wall_s * crowding()
        return max(self.config.policy.hang_timeout_s, floor_wall / self.clock.scale)

    def log_appear_limit(self) -> float:
        """Time (cluster seconds) a running job's log may take to appear before it is told
        as lost: a log not there yet is only a note, so the wall floor is generous (a
        burst of process starts on a loaded machine takes seconds)."""
        return max(self.hang_limit(), self.config.daemon.log_appear_wall_s / self.clock.scale)

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
                await controller_down(self, str(e))
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
        # `stop_requested`, inline: a checkpoint is made before each log with new lines,
        # thousands a pass.
        stopping = self.stopping
        if stopping is not None and stopping.is_set():
            raise PassStopped

    async def _pass(self) -> None:
        if self._dirty is None:   # a new process: a crash may have come between an end and
            await release_ended(self)   # its clean-up
        for sweep in await self.store.sweeps.all([SweepState.QUEUED]):
            with _superseded("sweep", sweep.id):
                # The cap it stops at, said before its first job (core/cost_cap.py).
                cap = self.cap_of(sweep)
                await self.store.sweeps.transition(sweep.id, SweepState.RUNNING,
                                                   f"sweep started; {cap.said()}",
                                                   rule="engine.start")
                self.mark(sweep.id)
        jobs = await self.store.active.jobs()
        await self.checkpoint()   # a stop that came while thousands of rows were read
        statuses = await poll(self, self.poll_clock, jobs)
        if statuses is None:
            return
        await self.checkpoint()
        await self._read_logs(jobs, statuses)
        # The jobs as they now are: the logs' facts applied (the store keeps the rows and
        # applies what it wrote), reconciled ones in their new state. Not a second full
        # read: only rows written some other way are read again.
        fresh = await self.store.active.jobs()
        now = self.clock.now()
        # Read once a pass: `nothing_to_judge` compares each job's silence with it. (The
        # limit follows the machine's load, read at most once a second: a job it would
        # call hung a moment later is judged by the next pass.)
        limit = self.hang_limit()
        running = JobState.RUNNING
        for job in fresh:
            status = statuses.get(job.backend_id or "") if statuses else None
            # Most jobs on most passes: no word from the scheduler (it is asked once a
            # minute), running, and heard from within the hang limit. `nothing_to_judge`
            # says so too; inline, 10,000 of them cost a third as much.
            if (status is None and job.state == running and job.last_output_at is not None
                    and now - job.last_output_at < limit):
                continue
            # A stop earlier in this pass may have cancelled the job: no longer ours to judge.
            if (job.state == JobState.SUBMITTING or job.backend_id in self._to_cancel
                    or nothing_to_judge(job, status, now, limit)):
                continue
            # Only before a job it acts on: skipping 10,000 takes some 10 ms with no await
            # (well inside YIELD_S), and a checkpoint for each added 5 ms to every pass.
            await self.checkpoint()
            try:   # `_superseded`, inline: per job and pass, a context manager costs
                if await judge(self, job, status, now):
                    self.tail_clocks.pop(job.id)   # ended: its log clock goes with it
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
            await controller_down(self, str(e))
        await self.flush_cancels()

    def spec_of(self, sweep: Sweep) -> SweepSpec:
        """The sweep's spec as it was accepted, parsed on first use and kept."""
        if sweep.id not in self._specs:
            self._specs[sweep.id] = stored_spec(sweep.kind, sweep.spec)
        return self._specs[sweep.id]

    def cap_of(self, sweep: Sweep) -> AppliedCap:
        """The sweep's node-hour cap (core/cost_cap.py): from its spec and the config alone,
        worked out once and kept, as the spec is (every submission checks it)."""
        if sweep.id not in self._caps:
            self._caps[sweep.id] = applied_cap(self.spec_of(sweep), self.config)
        return self._caps[sweep.id]

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
        due = await self.store.runs.sweeps_with_due_retries(self.clock.now())
        due |= await due_parents(self.store)   # a campaign whose stage's sweep ended
        dirty, self._dirty = self._dirty, set()
        self._planning = False
        if dirty is not None and not dirty and not due:
            return []   # nothing new: the running sweeps are not even read
        running = await self.store.sweeps.all([SweepState.RUNNING])
        return [s for s in running if dirty is None or s.id in dirty or s.id in due]

    async def _read_logs(self, jobs: Sequence[Job], statuses: dict[str, JobStatus]) -> None:
        if await read_logs(self.store, self.follower, self.tail_clocks, self.config.policy,
                           self.clock.now(), jobs, statuses, self.checkpoint,
                           self.stop_requested):
            self.notify()   # once: a waiting client wakes at the first, nothing runs between

    async def _advance_or_stop(self, sweep: Sweep) -> None:
        """A defect in planning one sweep stops that sweep for a person, with the error as
        evidence; it must not stop the daemon (a restart would meet it again, and every
        other sweep would wait)."""
        try:
            await planning.advance(self, sweep)
        except ControllerUnreachable:
            raise
        except Exception as e:
            log.exception("sweep.plan_failed", sweep=sweep.id)
            if (await self.store.sweeps.get(sweep.id)).state == SweepState.RUNNING:
                await stop_sweep(self, sweep, f"sweepd could not take the next step: {e}",
                                 rule="engine.plan_failed", evidence=repr(e), failing_nodes=[],
                                 recovery="none", outcome="a defect in sweepd; resume retries")


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
