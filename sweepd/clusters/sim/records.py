"""The simulated cluster's job records: one JSON file per job in `state_dir/jobs/`, beside
the trainer's exit code (`<id>.exit`) and its end on the cluster's clock (`<id>.end`), so
that a new SimCluster over the same state dir (a daemon restart) reads them all again.

The cluster keeps its own clock, independent of how fast this machine runs the trainers:
a job starts at its submission (the latest end among the jobs ended by then) or at the
end of the jobs it queued behind, and ends its planned duration later. Liveness is pid +
process start time, so a recycled pid is not mistaken for the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweepd.clusters import process_jobs
from sweepd.clusters.proc_ticks import start_ticks
from sweepd.clusters.process_jobs import CANCELLED as CANCELLED
from sweepd.clusters.process_jobs import PENDING as PENDING
from sweepd.clusters.process_jobs import STARTED as STARTED
from sweepd.sim.statefiles import atomic_write_json, read_json


@dataclass(frozen=True)
class JobRecords(process_jobs.JobRecords):
    """Written by atomic renames (the simulator's state files)."""

    def read(self, path: Path) -> Any:
        return read_json(path)

    def write(self, path: Path, data: Any) -> None:
        atomic_write_json(path, data)

    def exit_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.exit"

    def clock_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.end"

    def cluster_end(self, job_id: str) -> float | None:
        """When the job ended on the cluster's clock (None: not ended, or never ran)."""
        try:
            return float(self.clock_path(job_id).read_text().strip())
        except (OSError, ValueError):
            return None

    def cluster_now(self) -> float:
        """The cluster's clock now: the latest end of the jobs that have ended."""
        ends = (self.cluster_end(p.stem) for p in self.jobs_dir.glob("*.end"))
        return max((e for e in ends if e is not None), default=0.0)

    def cluster_start(self, record: dict[str, Any]) -> float:
        """When a starting job starts on the cluster's clock: at its submission, or when
        the last earlier job on any of its nodes ended (it queued behind that job)."""
        mine = set(record["nodes"])
        behind = (self.cluster_end(r["id"]) for r in self.all()
                  if int(r["id"]) < int(record["id"]) and not mine.isdisjoint(r["nodes"]))
        return max([float(record.get("after", 0.0)), *(e for e in behind if e is not None)])

    def exit_code(self, job_id: str) -> int | None:
        try:
            return int(self.exit_path(job_id).read_text().strip())
        except (OSError, ValueError):
            return None

    def running(self, record: dict[str, Any]) -> bool:
        if record["state"] != STARTED or self.exit_path(record["id"]).exists():
            return False
        return record["pid"] is not None and start_ticks(record["pid"]) == record["ticks"]
