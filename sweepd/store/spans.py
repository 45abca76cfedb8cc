"""When a job ran (`span_of`), read off its row alone: on the clock its log printed where it
printed one, else from its submission to its recorded end (`core/jobtimes.job_end`)."""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.store.rows import Job


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
