"""When a job ended, in cluster seconds: the scheduler's word, else its log's. When it ran
(`span_of`, on the clock its log printed where it printed one) is read off its row alone, in
`store/spans.py`, so that the reports and the kinds read it without the engine.

Not when sweepd noticed: a job that ended while the daemon was down would otherwise be
timed to the restart, and every duration and ETA built on it would grow with the outage.
"""

from __future__ import annotations

import os

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.store.rows import Job
from sweepd.store.spans import Span, span_of
from sweepd.util.clock import Clock

__all__ = ["Span", "job_end", "span_of"]


def job_end(clock: Clock, job: Job, status: JobStatus) -> tuple[float, str]:
    """(cluster seconds, where it came from). The scheduler's end (squeue/scontrol, sacct
    for a job the controller forgot); for a job the scheduler no longer knows at all, the
    log's last write (its last line: the JOB SUMMARY of a job that ended); else now (a
    scheduler that gives no times, as the simulated one). Never before the job's
    submission, never in the future (clocks of two hosts)."""
    now = clock.now()
    if status.end is not None:
        at, source = status.end / clock.scale, "scheduler"
    elif status.state == SchedulerState.GONE and (mtime := _log_mtime(job.log_path)) \
            is not None:
        at, source = mtime / clock.scale, "log"
    else:
        return now, "noticed"
    if job.submitted_at is not None and at < job.submitted_at:
        return job.submitted_at, source
    return min(at, now), source


def _log_mtime(path: str | None) -> float | None:
    if not path:
        return None
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
