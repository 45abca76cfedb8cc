"""One row per run, from its latest job: what `report --csv` writes and `compare` reads
(the value(s) it ran, where and when, how it ended, its TGS, MFU, memory and node-hours).
Every kind's runs alike: the kind's own table is its report's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sweepd.store.rows import Job, Run
from sweepd.store.spans import span_of
from sweepd.util.hostlists import expand_nodes

COLUMNS = ("run", "values", "job_id", "nodes", "state", "failure_class", "tgs", "mfu",
           "memory", "start", "end", "node_hours")


def _when(t: float | None) -> str | None:
    """A time as ISO 8601; a cluster clock no calendar holds (the simulated cluster's own
    clock runs far ahead of the machine's) as its seconds."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")
    except (ValueError, OverflowError, OSError):
        return f"{t:.0f}s"


def _memory(job: Job) -> str | None:
    """The job's memory: what its program compiled to (of the pool, where Memstats said
    it), else Memstats' used of the limit. The compiled total is what grows with the batch
    and meets the pool; Memstats' `used` is the parameters only (3.01 GB at every batch on
    the TPU chip)."""
    if job.mem_total_gb is not None:
        of = f" of {job.mem_limit_gb:.2f}" if job.mem_limit_gb is not None else ""
        return f"compiled {job.mem_total_gb:.1f}{of} GB"
    if job.mem_used_gb is not None and job.mem_limit_gb is not None:
        return f"{job.mem_used_gb:.1f}/{job.mem_limit_gb:.1f} GB"
    return None


def run_rows(runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Each run with its latest attempt's job; node-hours over all its attempts."""
    by_run: dict[int, list[Job]] = {}
    for job in jobs:
        by_run.setdefault(job.run_id, []).append(job)
    rows = []
    for run in sorted(runs, key=lambda r: r.seq):
        attempts = sorted(by_run.get(run.id, []), key=lambda j: j.attempt)
        latest = attempts[-1] if attempts else None
        span = span_of(latest) if latest is not None else None
        hours = 0.0
        for job in attempts:
            s = span_of(job)
            if s is not None:
                hours += (s.end - s.start) / 3600 * len(expand_nodes(job.nodes))
        rows.append({
            "run": run.seq, "values": run.label,
            "job_id": latest.backend_id if latest else None,
            "nodes": latest.nodes if latest else run.nodes, "state": run.state,
            "failure_class": run.failure_class, "tgs": run.tgs, "mfu": run.mfu,
            "memory": _memory(latest) if latest else None,
            "start": _when(span.start) if span else None,
            "end": _when(span.end) if span else None,
            "node_hours": round(hours, 3)})
    return rows
