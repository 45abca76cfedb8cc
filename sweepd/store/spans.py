"""When a job ran (`span_of`), read off its row alone: on the clock its log printed where it
printed one, else from its submission to its recorded end (`core/jobtimes.job_end`). The
same rule as SQL over a jobs row (`SPAN_SECONDS_SQL`), for sums that read no rows."""

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


# `span_of`'s length in seconds as an SQL expression over a `jobs` row, NULL where span_of is
# None: the same rule, for an aggregate over a sweep's jobs that reads none of its rows
# (`JobsTable.span_totals`; tests/test_cost_cap.py holds the two to each other).
SPAN_SECONDS_SQL = (
    "CASE WHEN span_start IS NOT NULL AND span_end IS NOT NULL"
    " THEN max(span_end - span_start, 0)"
    " WHEN submitted_at IS NOT NULL AND coalesce(ended_at, last_output_at) IS NOT NULL"
    " THEN max(coalesce(ended_at, last_output_at) - submitted_at, 0) END")


@dataclass(frozen=True)
class SpanTotal:
    """The spans of a sweep's jobs that ran on one node set (a hostlist as stored): their
    seconds summed, and those of the ended ones with their count."""

    nodes: str
    seconds: float
    ended_seconds: float
    ended: int
