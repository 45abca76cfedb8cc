"""When a job ended, in cluster seconds: the scheduler's word, else its log's; and when it
ran (`span_of`), on the clock its log printed where it printed one.

Not when sweepd noticed: a job that ended while the daemon was down would otherwise be
timed to the restart, and every duration and ETA built on it would grow with the outage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.store.rows import Job
from sweepd.util.clock import Clock


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


@dataclass(frozen=True)
class Span:
    """When a job ran, (start, end) in seconds. `printed`: on the clock its log printed (the
    simulated cluster's own); else on the daemon's, which is the cluster's on a real
    cluster but not on the simulated one (there it is wall seconds / time_scale)."""

    start: float
    end: float
    printed: bool


def span_of(job: Job) -> Span | None:
    """The job's span: the one its log printed (`Job.span_start`/`span_end`, every kind's
    job, read by the log pass), else its submission to its end as recorded (the
    scheduler's end, `job_end`; a job under way: its last output so far), its queue wait
    included. None: never submitted, or no end yet and no output."""
    if job.span_start is not None and job.span_end is not None:
        return Span(job.span_start, max(job.span_start, job.span_end), printed=True)
    end = job.ended_at if job.ended_at is not None else job.last_output_at
    if job.submitted_at is None or end is None:
        return None
    return Span(job.submitted_at, max(job.submitted_at, end), printed=False)
