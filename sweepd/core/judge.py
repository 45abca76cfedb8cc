"""Judging one followed job on a pass: the scheduler's word and its log's facts make it
running, finished (concluded) or hung."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.core.conclude import conclude
from sweepd.core.queued_check import check_queued, nodes_unavailable
from sweepd.monitor.tail import is_lost
from sweepd.store.rows import Job
from sweepd.store.states import JobState

if TYPE_CHECKING:
    from sweepd.core.follow import LogFollower
    from sweepd.core.parts import EngineParts

    class Follower(EngineParts, Protocol):
        """What judging needs of the engine beyond its parts: the log follower, the hang
        limit, the loop's wake-up."""

        follower: LogFollower

        def hang_limit(self) -> float:
            """Silence after which a running job is hung."""

        def wake(self) -> None:
            """Run the next pass at once."""


def nothing_to_judge(job: Job, status: JobStatus | None, now: float, hang_limit: float) -> bool:
    """True when `judge` would leave the job alone (no write, no call, no wake-up), read
    off the row alone: the scheduler said nothing new (no word, or the state stored) and
    not an end; a queued job shows no output, no RUNNING and no pending reason naming dead
    nodes; any other job is not due to be called hung (`hang_silence`). At thousands of
    followed jobs most are such on most passes, and the engine skips them. False does not
    promise an action (the queued check may find the nodes fine)."""
    if status is not None and (status.state != job.scheduler_state or status.state.finished):
        return False
    if job.state == JobState.QUEUED:
        acts = (job.last_output_at is not None
                or (status is not None and status.state == SchedulerState.RUNNING)
                or (nodes_unavailable(status) and job.backend_id is not None)
                or (status is not None and status.waiting is not None))
        return not acts
    return hang_silence(job, now, hang_limit) is None


async def judge(engine: Follower, job: Job, status: JobStatus | None, now: float) -> bool:
    """The job's state from the scheduler's word and its log: running, finished, hung.
    True when it ended (concluded): the engine forgets its log clock."""
    if status is not None and status.state != job.scheduler_state:
        await engine.store.jobs.update(job.id, scheduler_state=str(status.state))
    if status is not None and status.state.finished:
        if engine.follower.behind(job.id):   # the rest of its log first: the next pass
            engine.wake()
            return False
        await engine.follower.forget(job.id)
        ended = await engine.store.jobs.get(job.id)
        if ended.state == JobState.QUEUED and ended.last_output_at is not None:
            # It ran unwatched (the daemon was down, or its whole run fell between two
            # passes): its log says it ran, so the trail says so as a watched run's does
            # and a restart leaves the same events as an uninterrupted sweep.
            await maybe_running(engine, ended, None, now)
            ended = await engine.store.jobs.get(job.id)
        await conclude(engine, ended, status)
        engine.mark(job.sweep_id)
        engine.notify()
        return True
    if job.state == JobState.QUEUED:
        if status is not None and status.waiting is not None:
            await say_waiting(engine, job, status.waiting)
        if not await check_queued(engine, job, status):   # pending on a dead node?
            await maybe_running(engine, job, status, now)
        return False
    await check_hang(engine, job, now)
    return False


async def say_waiting(engine: Follower, job: Job, waiting: str) -> None:
    """A progress line for what a queued job waits for (another process's hold on the local
    backend's accelerator: `show`, `watch` and `run` say for whom), once per change."""
    line = f"sweep {job.sweep_id}: job {job.backend_id} {waiting}"
    said = [e.reason for e in await engine.store.events.of_sweep(job.sweep_id, kind="progress")
            if e.job_id == job.id]
    if said and said[-1] == line:
        return
    await engine.store.events.add(job.sweep_id, "progress", line, run_id=job.run_id,
                                  job_id=job.id)
    engine.notify()


async def maybe_running(engine: Follower, job: Job, status: JobStatus | None, now: float
                        ) -> None:
    """RUNNING on the scheduler's word or on the job's first log output, whichever comes
    first: the hang clock starts then, not at the next poll."""
    if status is not None and status.state == SchedulerState.RUNNING:
        await engine.store.jobs.transition(job.id, JobState.RUNNING, "scheduler says RUNNING",
                                               rule="scheduler.running",
                                               last_output_at=job.last_output_at or now)
    elif job.last_output_at is not None:
        first = await asyncio.to_thread(_first_line, job.log_path)
        await engine.store.jobs.transition(
            job.id, JobState.RUNNING, "its log has output: the job runs",
            rule="log.first_output", evidence=f"{job.log_path}: {first}",
            last_output_at=job.last_output_at)
        engine.notify()


def hang_silence(job: Job, now: float, limit: float) -> float | None:
    """How long the running job has been silent, when that makes it hung (None: it is not:
    not running, output never seen or not observable, its log says it ended, or silent
    less than `limit`)."""
    # A hung job was cancelled once when it was called hung; from then on the
    # scheduler's answer (at the poll period) says when it has ended.
    if job.state != JobState.RUNNING or job.last_output_at is None:
        return None
    # Silence in a log that cannot be read, or was never seen, was never observed; the
    # follower marks a log still not there after the hang limit lost.
    if is_lost(job.log_identity) or (job.log_path and job.log_identity is None):
        return None
    if job.summary_status is not None:
        return None   # its log says it ended: the scheduler's word on its end follows
    silent = now - job.last_output_at
    return silent if silent >= limit else None


async def check_hang(engine: Follower, job: Job, now: float) -> None:
    limit = engine.hang_limit()
    silent = hang_silence(job, now, limit)
    if silent is None:
        return
    evidence = (f"no new log output for {silent:.0f} s (limit {limit:.0f} s) in phase "
                f"{job.phase}, last step {job.last_step}")
    await engine.store.jobs.transition(job.id, JobState.HUNG, "hung: cancelling",
                                    rule="hang.no_output", evidence=evidence)
    if job.backend_id:
        engine.cancel_later(job.backend_id)


def _first_line(path: str | None) -> str:
    """The log's first line, as the evidence that the job runs (best effort)."""
    if not path:
        return "?"
    try:
        with open(path, "rb") as f:
            return f.readline(300).decode(errors="replace").strip() or "(output)"
    except OSError as e:
        return f"(unreadable: {e.strerror})"
