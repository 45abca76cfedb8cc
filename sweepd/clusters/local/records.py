"""The local backend's job records: `state_dir/jobs/<id>.json` per job (token, log, command,
state), beside what its wrapper writes (`<id>.pid`, `<id>.status`) and the backend's cancel
marker (`<id>.cancel`), so a new backend over the same directory (a daemon restart) knows
every job and how each ended, even one that ended while no daemon ran.

A record's `state` is the backend's own: PENDING (queued behind the running job), STARTING
(its wrapper being launched), STARTED, CANCELLED (cancelled while pending). Whether a
started job still runs is read from the processes: its wrapper's or its trainer's pid with
the same start ticks (/proc/PID/stat), so a reused pid is not taken for the job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweepd.clusters import process_jobs
from sweepd.clusters.local.wrapper import (
    alive,
    cancel_path,
    pid_path,
    read_json,
    status_path,
    write_json,
)
from sweepd.clusters.process_jobs import CANCELLED as CANCELLED
from sweepd.clusters.process_jobs import PENDING as PENDING
from sweepd.clusters.process_jobs import STARTED as STARTED

STARTING = "STARTING"
# A STARTING record whose wrapper never wrote its pid file within this many wall seconds
# was lost with a crash between the record and the launch: it is not running.
LAUNCH_LOST_S = 30.0


def kill_command(jobs_dir: Path, ids: list[str]) -> str:
    """The command that cancels these jobs with no sweepd running: SIGTERM to each one's
    wrapper (it passes it on to the trainer's group, SIGKILL after the grace period)."""
    pids = []
    for job_id in ids:
        data = read_json(pid_path(jobs_dir, job_id)) if job_id.isdigit() else None
        wrapper = data.get("wrapper") if isinstance(data, dict) else None
        if isinstance(wrapper, list) and alive(wrapper):
            pids.append(str(wrapper[0]))
    return f"kill -TERM {' '.join(pids)}" if pids else \
        f"kill -TERM <the wrapper pid in {jobs_dir}/<id>.pid>"


@dataclass(frozen=True)
class JobRecords(process_jobs.JobRecords):
    """Written durably (fsync: a record outlives a power cut its job may survive)."""

    def read(self, path: Path) -> Any:
        return read_json(path)

    def write(self, path: Path, data: Any) -> None:
        write_json(path, data)

    def status(self, job_id: str) -> dict[str, Any] | None:
        """The wrapper's status file: the job has ended."""
        data = read_json(status_path(self.jobs_dir, job_id))
        return data if isinstance(data, dict) and isinstance(data.get("exit_code"), int) \
            else None

    def pids(self, job_id: str) -> dict[str, Any]:
        data = read_json(pid_path(self.jobs_dir, job_id))
        return data if isinstance(data, dict) else {}

    def cancel_asked(self, job_id: str) -> bool:
        return cancel_path(self.jobs_dir, job_id).exists()

    def mark_cancel(self, job_id: str) -> None:
        write_json(cancel_path(self.jobs_dir, job_id), {"at": time.time()})

    def running(self, record: dict[str, Any]) -> bool:
        """Started and not ended: no status file, and its wrapper or its trainer alive
        (the trainer may outlive a wrapper killed by someone else)."""
        if record["state"] not in (STARTING, STARTED) or self.status(record["id"]):
            return False
        pids = self.pids(record["id"])
        if not pids:   # the wrapper has not written its pid file yet
            if record["state"] == STARTED:
                return alive(record.get("wrapper"))
            return time.time() - float(record.get("starting_at", 0.0)) < LAUNCH_LOST_S
        return alive(pids.get("wrapper")) or alive(pids.get("trainer"))
