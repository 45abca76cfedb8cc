"""The cost cap: a sweep stops before submitting the job that would take it past its
`max_node_hours` (the spec's; by default the 8 h timebox x its nodes).

What it has taken: every job's span (store/spans.span_of: the log's cluster time, else
submission to end) x the nodes it ran on. What the next job would take: the mean span of
the sweep's ended jobs x the next job's nodes; before any job has ended, nothing is known
and nothing is stopped (a first job is never refused on a guess)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.store.rows import Job
from sweepd.store.spans import span_of
from sweepd.util.hostlists import expand_nodes

RULE = "budget.node_hours"


@dataclass(frozen=True)
class CapCheck:
    spent: float      # node-hours the sweep's jobs have taken so far
    next_job: float   # node-hours the next job is expected to take
    cap: float

    @property
    def passed(self) -> bool:
        return self.spent + self.next_job > self.cap

    def said(self) -> str:
        return (f"node-hour cap: {self.spent:.2f} node-h taken + about {self.next_job:.2f} "
                f"for the next job would pass max_node_hours {self.cap:g}")


def check_cap(jobs: Sequence[Job], next_nodes: int, cap: float) -> CapCheck:
    spent = 0.0
    per_node_hours: list[float] = []
    for job in jobs:
        span = span_of(job)
        if span is None:
            continue
        hours = max(0.0, span.end - span.start) / 3600
        spent += hours * len(expand_nodes(job.nodes))
        if job.ended_at is not None:
            per_node_hours.append(hours)
    mean = sum(per_node_hours) / len(per_node_hours) if per_node_hours else 0.0
    return CapCheck(spent=spent, next_job=mean * next_nodes, cap=cap)
