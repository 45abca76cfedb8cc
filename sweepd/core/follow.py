"""Following one job's log: read new lines, turn them into facts (`core/log_facts.py`), store
facts and offset together. The tailer of each job is kept between passes; its offset lives
in the store, so a restarted daemon resumes where it was."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from sweepd.core.kind_facts import KindFacts
from sweepd.core.log_facts import LogChunk, facts_of
from sweepd.monitor.tail import NOT_THERE, LogTailer, is_lost
from sweepd.monitor.watch import LogWatch
from sweepd.store.rows import Job
from sweepd.store.states import JobState
from sweepd.store.store import Store
from sweepd.util.clock import Clock

log = structlog.get_logger("sweepd.core.follow")


def _read_all(jobs: Sequence[Job], tailers: Sequence[LogTailer | None],
              stopped: Callable[[], bool] | None = None,
              ) -> tuple[list[list[tuple[int, str]]], list[int]]:
    """Every log's new lines, and the indices of the logs that may say something: all but
    those a stat showed unchanged since a read whose offset and identity the store has (at
    10,000 jobs most of a pass; nothing more is done for them). Once `stopped` says so, no
    more logs are read (a restart's backlog over thousands of logs takes seconds, and a
    stop must not wait for it)."""
    out: list[list[tuple[int, str]]] = []
    touched: list[int] = []
    for i, tailer in enumerate(tailers):
        if tailer is None:
            out.append([])
            continue
        if stopped is not None and stopped():
            out.append([])
            touched.append(i)
            continue
        try:
            out.append(tailer.read_lines_sync())
        except OSError as e:  # one unreadable log must not stop the others being read
            log.warning("log.unreadable", path=str(tailer.path), error=str(e))
            out.append([])
        job = jobs[i]
        if (not tailer.unchanged or tailer.offset != job.log_offset
                or tailer.identity != job.log_identity):
            touched.append(i)
    return out, touched


def _lost(job: Job, tailer: LogTailer, now: float, grace_s: float) -> bool:
    """The log cannot be read where one is expected: it was seen, or the job runs. A log
    never seen and not there is lost only once the job has run `grace_s` without it: a
    job's log appears after the scheduler says RUNNING, later still on a loaded machine or
    a shared file system, and a log not there yet is no loss to tell."""
    if not tailer.lost:
        return False
    if tailer.identity is not None:
        return True
    if job.state not in (JobState.RUNNING, JobState.HUNG):
        return False
    if tailer.lost != NOT_THERE or job.last_output_at is None:
        return True
    return now - job.last_output_at >= grace_s


class LogFollower:
    def __init__(self, store: Store, clock: Clock, missing_grace_s: float,
                 watch: bool = True) -> None:
        self._store = store
        self._clock = clock
        # How long a running job's log may be not there yet before it is lost (the hang
        # limit: a job silent that long without a log is judged by the scheduler).
        self._grace_s = missing_grace_s
        self._tailers: dict[int, LogTailer] = {}
        self._detached: set[int] = set()   # jobs whose deleted log was already reported
        self.kind_facts = KindFacts(store)  # what each job's kind wants from its lines
        # Which logs were written to, from the kernel: a hint for an earlier read (`written`).
        self.watch = LogWatch(watch)

    async def retain(self, job_ids: set[int]) -> None:
        """Close the logs of jobs that are no longer followed (ended, cancelled)."""
        for job_id in set(self._tailers) - job_ids:
            await self.forget(job_id)

    async def forget(self, job_id: int) -> None:
        self._detached.discard(job_id)
        self.watch.forget(job_id)
        tailer = self._tailers.pop(job_id, None)
        if tailer is not None:
            await tailer.close()

    @property
    def reads(self) -> dict[int, int]:
        """How many times each followed job's log was read (a log that did not grow since
        its last read is looked at with one `stat`, not read)."""
        return {job_id: t.reads for job_id, t in self._tailers.items()}

    @property
    def looks(self) -> int:
        """How many times the followed logs were looked at (a `stat` each, read or not)."""
        return sum(t.stats for t in self._tailers.values())

    def written(self) -> set[int]:
        """The jobs whose open logs were written to since the last call, as far as this
        host's kernel saw (nothing of a write by another host to a shared file system)."""
        return self.watch.drain()

    def behind(self, job_id: int) -> bool:
        """The last read left bytes of the job's log for the next one (one read is bounded):
        a job that has ended is judged only once its log is read to the end."""
        tailer = self._tailers.get(job_id)
        return tailer is not None and tailer.has_more

    async def read_chunks(self, jobs: Sequence[Job],
                          checkpoint: Callable[[], Awaitable[None]] | None = None,
                          stopped: Callable[[], bool] | None = None,
                          ) -> list[LogChunk | None]:
        """The facts in what is new in each job's log, not yet stored (the engine stores a
        whole pass's chunks in one transaction); None where nothing changed. All the file
        reads happen in one worker-thread call; `checkpoint` is awaited before each log
        with new lines is parsed (a stop may end the pass there: nothing of it is stored,
        and the caller drops the tailers, whose offsets moved on, to re-read from the
        stored ones). `stopped` is asked in the reading thread between two logs: once it
        says so, the rest is not read, and `checkpoint` ends the pass."""
        # The kept tailers by a dict lookup, a call only for a new one (10,000 jobs a pass).
        kept = self._tailers.get
        tailers = [kept(job.id) or self._tailer(job) for job in jobs]
        lines, touched = await asyncio.to_thread(_read_all, jobs, tailers, stopped)
        await self.kind_facts.prepare([jobs[i] for i in touched if lines[i]])
        if stopped is not None and stopped() and checkpoint is not None:
            await checkpoint()
        # Only the logs that may say something: an untouched one is no chunk (its lines,
        # `lost`, `detached`, offset and identity are as the store has them).
        out: list[LogChunk | None] = [None] * len(jobs)
        # One `lost` per job for the pass: what is told and what is stored agree.
        now = self._clock.now()
        lost: dict[int, bool] = {}
        for i in touched:
            job, tailer = jobs[i], tailers[i]
            assert tailer is not None   # a job without a log path is never touched
            if tailer.opened_anew:
                # A log opened (or opened again: replaced) this pass: watched from now on.
                tailer.opened_anew = False
                self.watch.watch(job.id, str(tailer.path))
            gone = lost[i] = bool(tailer.lost) and _lost(job, tailer, now, self._grace_s)
            if gone or tailer.detached:
                await self._tell(job, tailer, gone)
        for i in touched:
            job, t, got, gone = jobs[i], tailers[i], lines[i], lost[i]
            assert t is not None
            if got:
                if checkpoint is not None:
                    await checkpoint()
                out[i] = self._chunk(job, t, got, gone, now)
            # A quiet log is a chunk only when its offset or identity moved.
            elif gone or t.offset != job.log_offset or t.identity != job.log_identity:
                out[i] = self._chunk(job, t, got, gone, now)
        return out

    async def _tell(self, job: Job, tailer: LogTailer, lost: bool) -> None:
        """A log that vanished or cannot be read is news for the person: the job is then
        judged without it (no hang is called on silence nobody could observe)."""
        if tailer.detached and job.id not in self._detached:
            self._detached.add(job.id)
            text = (f"job {job.backend_id}: its log {job.log_path} is gone ({tailer.detached});"
                    " sweepd reads on through the file it has open, but the log will not be "
                    "on disk to look at")
            await self._store.events.add(job.sweep_id, "note", text, rule="log.detached",
                                               evidence=tailer.detached, run_id=job.run_id,
                                               job_id=job.id)
            await self._store.events.add(job.sweep_id, "progress", text, run_id=job.run_id,
                                               job_id=job.id)
        if not lost or is_lost(job.log_identity):
            return
        text = (f"job {job.backend_id}: its log cannot be read ({tailer.lost}: {job.log_path});"
                " the job cannot be watched for hangs, and its end is judged by the "
                "scheduler's state and exit code")
        await self._store.events.add(job.sweep_id, "note", text, rule="log.lost",
                                           evidence=tailer.lost, run_id=job.run_id, job_id=job.id)
        await self._store.events.add(job.sweep_id, "progress", text, run_id=job.run_id,
                                           job_id=job.id)
        log.warning("log.lost", job=job.id, path=job.log_path, why=tailer.lost)

    def _tailer(self, job: Job) -> LogTailer | None:
        if not job.log_path:
            return None
        tailer = self._tailers.get(job.id)
        if tailer is None:
            tailer = LogTailer(Path(job.log_path), offset=job.log_offset,
                               identity=job.log_identity)
            self._tailers[job.id] = tailer
        return tailer

    def _chunk(self, job: Job, tailer: LogTailer, lines: list[tuple[int, str]],
               lost: bool, now: float) -> LogChunk | None:
        identity = tailer.stored_identity if lost else tailer.identity
        if not lines:
            if identity != job.log_identity or tailer.offset != job.log_offset:
                fields: dict[str, Any] = {"log_offset": tailer.offset, "log_identity": identity}
                if is_lost(job.log_identity) and not tailer.lost:
                    # Readable again after being lost: silence is observable from now on.
                    fields["last_output_at"] = now
                return LogChunk(job.id, fields)
            return None
        chunk = facts_of(job, lines)
        self.kind_facts.fold(job, lines, chunk.fields)
        chunk.fields.update(log_offset=tailer.offset, log_identity=identity,
                            last_output_at=now)
        chunk.written_at = tailer.mtime
        return chunk
