"""The job bookkeeping of the backends whose jobs are processes on this host with one JSON
record each (`state_dir/jobs/<id>.json`): the local backend and the simulated cluster.

`JobRecords` keeps the records (load, save, all, in id order) and says which are live
(queued, or started with a process still running: `running`, each backend's own way of
reading its processes, by pid and start ticks, `proc_ticks`). `RecordJobs` answers the
job half of the backend protocol from them: `poll` (after starting whatever the scheduler
lets start), `find_by_token`, `live_tokens`, and `cancel`'s common part (a queued job
leaves the queue; a started one is the backend's to stop). So a new backend object over the
same directory (a daemon restart) knows every job and how each ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from sweepd.clusters.base import JobStatus, SchedulerState, Submitted
from sweepd.clusters.threaded import ThreadedJobs
from sweepd.util.locks import locked

# The record states both backends share (the local backend adds STARTING).
PENDING, STARTED, CANCELLED = "PENDING", "STARTED", "CANCELLED"


@dataclass(frozen=True)
class JobRecords:
    """One JSON file per job in `jobs_dir`. How a file is read and written is the
    backend's (`read`, `write`): the local backend's writes are durable (fsync), the
    simulator's atomic renames."""

    jobs_dir: Path

    def read(self, path: Path) -> Any:
        raise NotImplementedError

    def write(self, path: Path, data: Any) -> None:
        raise NotImplementedError

    def record_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def load(self, job_id: str) -> dict[str, Any] | None:
        if not job_id.isdigit():
            return None
        record = self.read(self.record_path(job_id))
        return record if isinstance(record, dict) else None

    def save(self, record: dict[str, Any]) -> None:
        self.write(self.record_path(str(record["id"])), record)

    def all(self) -> list[dict[str, Any]]:
        ids = sorted(int(p.stem) for p in self.jobs_dir.glob("*.json") if p.stem.isdigit())
        return [r for r in (self.load(str(i)) for i in ids) if r is not None]

    def running(self, record: dict[str, Any]) -> bool:
        """Started and not ended (the backend's processes say)."""
        raise NotImplementedError

    def live(self, record: dict[str, Any]) -> bool:
        """Queued or running: the job still holds (or will hold) its nodes."""
        return record["state"] == PENDING or self.running(record)


Records = TypeVar("Records", bound=JobRecords)


class RecordJobs(ThreadedJobs, Generic[Records]):
    """`_poll`, `_find_by_token`, `_live_tokens` and `_cancel` over `records`, under the
    scheduler's lock file `_lock` where they change what runs. A backend gives `_schedule`
    (start what may start; the caller holds the lock), `_status` of a started job,
    `_stop` of a running one, and `_reachable` where its controller can be away."""

    records: Records
    _lock: Path

    def _schedule(self) -> None:
        raise NotImplementedError

    def _started_status(self, record: dict[str, Any]) -> JobStatus:
        raise NotImplementedError

    def _pending_status(self, record: dict[str, Any]) -> JobStatus:
        return JobStatus(SchedulerState.PENDING, None, "Resources")

    def _stop(self, record: dict[str, Any]) -> None:
        """Stop a running job (the caller holds the lock)."""
        raise NotImplementedError

    def _reachable(self) -> None:
        """Raise ControllerUnreachable while the backend's controller is away."""

    def _status(self, record: dict[str, Any]) -> JobStatus:
        if record["state"] == CANCELLED:
            return JobStatus(SchedulerState.CANCELLED, None, "cancelled while pending")
        if record["state"] == PENDING:
            return self._pending_status(record)
        return self._started_status(record)

    def _poll(self, ids: list[str]) -> dict[str, JobStatus]:
        self._reachable()
        with locked(self._lock):
            self._schedule()
        result: dict[str, JobStatus] = {}
        for job_id in ids:
            record = self.records.load(job_id)
            result[job_id] = (JobStatus(SchedulerState.GONE) if record is None
                              else self._status(record))
        return result

    def _find_by_token(self, token: str) -> Submitted | None:
        self._reachable()
        for record in self.records.all():
            if record["token"] == token:
                return Submitted(record["id"], record["job_name"], Path(record["log"]))
        return None

    def _live_tokens(self) -> dict[str, str]:
        self._reachable()
        return {r["id"]: r["token"] for r in self.records.all() if self.records.live(r)}

    def _cancel(self, job_id: str) -> None:
        """A queued job leaves the queue (CANCELLED, never started); a running one is
        stopped its backend's way; one that has ended is left as it ended."""
        with locked(self._lock):
            record = self.records.load(job_id)
            if record is None:
                return
            if record["state"] == PENDING:
                record["state"] = CANCELLED
                self.records.save(record)
            elif self.records.running(record):
                self._stop(record)
