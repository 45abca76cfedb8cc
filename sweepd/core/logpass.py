"""A pass's log reading: which logs are due (each job's own cadence: prompt while output
flows, backing off while it is silent), all of them read in one worker-thread call, and
their facts stored in one transaction."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from sweepd.clusters.base import JobStatus
from sweepd.config import PolicyConfig
from sweepd.core.follow import LogFollower
from sweepd.core.metrics import observe_stored
from sweepd.store.rows import Job
from sweepd.store.states import JobState
from sweepd.store.store import Store

QUIET_GRACE = 2  # empty reads before a log's polling slows


@dataclass
class _TailClock:
    """One job's log polling: when it is next due, and the interval that led there."""

    next_at: float = 0.0
    interval: float = 0.0
    quiet: int = 0  # reads in a row that found nothing
    # A write to the log was heard (inotify): its writes wake it, so it is not read ahead
    # of its clock (`TailClocks.ahead`); the clock stays, for what inotify does not hear.
    heard: bool = False
    told: bool = False  # heard since its last read


class TailClocks:
    """Every followed job's log cadence, by job id."""

    def __init__(self) -> None:
        self._clocks: dict[int, _TailClock] = {}
        self._last_pass: float | None = None   # `now` of the last pass that read logs

    def ahead(self, now: float, policy: PolicyConfig) -> float:
        """How early a log may be read: half the time since the last pass read logs (the
        next one is about as far off), at most half the base interval. A log falls due
        between two passes; read at the pass nearer its due time rather than always the
        later one. Passes 0.44 s apart and a 0.5 s interval read each log every 0.88 s:
        a line written after a read waited some 0.9 s plus the pass for the next (the
        10,000-job p99, docs/benchmarks.md)."""
        last, self._last_pass = self._last_pass, now
        if last is None or now <= last:
            return 0.0
        return min((now - last) / 2, policy.tail_interval_s / 2)

    def hear(self, job_ids: Iterable[int]) -> None:
        """Logs written to since the last pass (`LogFollower.written`): due now, however far
        off their clocks (a log quiet for long, backed off, is read at the pass after its
        next line). A log whose writes are heard is read at the pass after each write, and
        otherwise by its clock, never ahead of it: `ahead` looks at every log at every pass,
        most with nothing new. A log on a shared file system written by another host is
        never heard, and keeps `ahead`; so does a heard one whose next output no event
        announced (`_read_ids`: its watch was lost)."""
        clocks = self._clocks
        for job_id in job_ids:
            tail = clocks.get(job_id)
            if tail is not None:   # none: not followed (yet, or any longer)
                tail.heard, tail.told, tail.next_at = True, True, 0.0

    def due(self, job: Job, now: float, finished: bool) -> bool:
        tail = self._clocks.get(job.id)
        if tail is None:
            tail = self._clocks[job.id] = _TailClock()
        return job.state != JobState.SUBMITTING and (now >= tail.next_at or finished)

    def read(self, job_id: int, fresh: bool, now: float, policy: PolicyConfig) -> None:
        """The job's log was read (`read_all` of one)."""
        self._read_ids([job_id], [fresh], now, policy)

    def due_jobs(self, jobs: Sequence[Job], now: float,
                 statuses: dict[str, JobStatus], ahead: float = 0.0) -> list[Job]:
        """`due` of every job, in one loop (10,000 jobs a pass: a call each cost more than
        the test), a log falling due within `ahead` counted due now. A job the scheduler
        says has finished is due at once. A log whose writes are heard is never early."""
        clocks, out = self._clocks, []
        submitting = JobState.SUBMITTING
        by = now + ahead
        for job in jobs:
            tail = clocks.get(job.id)
            if tail is None:
                tail = clocks[job.id] = _TailClock()
            if job.state == submitting:
                continue
            if (now if tail.heard else by) >= tail.next_at:
                out.append(job)
            elif statuses:   # the scheduler is asked once a minute: most passes, no word
                status = statuses.get(job.backend_id or "")
                if status is not None and status.state.finished:
                    out.append(job)
        return out

    def read_all(self, jobs: Sequence[Job], fresh: Sequence[bool], now: float,
                 policy: PolicyConfig) -> None:
        """Every job read this pass, `fresh` where its read found new output."""
        self._read_ids([job.id for job in jobs], fresh, now, policy)

    def _read_ids(self, job_ids: Sequence[int], fresh: Sequence[bool], now: float,
                  policy: PolicyConfig) -> None:
        """The logs were read: each due again soon if it had new output, else, once it has
        been quiet for QUIET_GRACE reads in a row, later and later. A log writing a line a
        second, read every half second, finds nothing every other read: backing off at the
        first empty one left a line waiting 1-2 s for its read (the 10,000-job p99). One
        loop: a pass reads thousands."""
        clocks = self._clocks
        base, most = policy.tail_interval_s, policy.tail_backoff_max_s
        base_at = now + base
        for job_id, new in zip(job_ids, fresh, strict=True):
            tail = clocks[job_id]
            if new:
                if tail.heard and not tail.told:
                    # New output no inotify event announced: its watch is lost (the log
                    # replaced and the new watch refused, another job's log on the same
                    # file, an unmount): read ahead again, as a log never heard, until a
                    # write is heard again.
                    tail.heard = False
                tail.told = False
                tail.quiet, tail.interval, tail.next_at = 0, base, base_at
                continue
            tail.told = False
            tail.quiet += 1
            tail.interval = (base if tail.quiet <= QUIET_GRACE
                             else min(max(tail.interval * 2, base), most))
            tail.next_at = now + tail.interval

    def pop(self, job_id: int) -> None:
        self._clocks.pop(job_id, None)

    def clear(self) -> None:
        """Every log due at the next pass."""
        self._clocks.clear()


async def read_logs(store: Store, follower: LogFollower, clocks: TailClocks,
                    policy: PolicyConfig, now: float, jobs: Sequence[Job],
                    statuses: dict[str, JobStatus], checkpoint: Callable[[], Awaitable[None]],
                    stopped: Callable[[], bool]) -> bool:
    """Read every due log; store all the facts in one transaction. True when some job
    had new output (news for the clients)."""
    # The pass's lines, facts and chunks (a few objects per log, thousands of logs) die
    # when it ends. A collection meanwhile would move them to the old generation, and
    # its growth sets off full collections over every object the daemon keeps (the
    # active jobs, their open logs): the collector waits for the pass's end instead.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return await _read_logs(store, follower, clocks, policy, now, jobs, statuses,
                                checkpoint, stopped)
    finally:
        if collecting:
            gc.enable()


async def _read_logs(store: Store, follower: LogFollower, clocks: TailClocks,
                     policy: PolicyConfig, now: float, jobs: Sequence[Job],
                     statuses: dict[str, JobStatus], checkpoint: Callable[[], Awaitable[None]],
                     stopped: Callable[[], bool]) -> bool:
    clocks.hear(follower.written())
    due = clocks.due_jobs(jobs, now, statuses, clocks.ahead(now, policy))
    chunks = await follower.read_chunks(due, checkpoint, stopped)
    written = [c for c in chunks if c is not None]
    await store.jobs.record_logs(written)
    observe_stored(written)   # line -> stored latency, for /metrics
    fresh = [c is not None and "last_output_at" in c.fields for c in chunks]
    clocks.read_all(due, fresh, now, policy)
    return any(fresh)
