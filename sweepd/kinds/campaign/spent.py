"""What a campaign has spent of its budget: wall hours on the cluster's clock, from its
stages' first job's start to their last job's end (docs/campaign.md, "Budget and
messages"). Read from the jobs as stored (`store/spans.span_of`), so a restarted daemon
finds the same figure.

On one clock alone: where the stages' job logs print the cluster's own (the simulated
cluster's `Cluster time:`), only those spans count, so the figure is the cluster's however
loaded the machine that runs the simulation is (its wall latency, stretched by
1/time_scale on the daemon's clock, is none of the cluster's time); elsewhere each job from
its submission (its queue wait) to its end as the scheduler says, and the time between
stages counts as it passes on the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweepd.store.rows import Job
from sweepd.store.spans import span_of


def spent_hours(jobs: Iterable[Job]) -> float:
    """The campaign's hours so far on the cluster's clock (0 before any job has a span)."""
    spans = [s for job in jobs if (s := span_of(job)) is not None]
    on_one_clock = [s for s in spans if s.printed] or spans
    if not on_one_clock:
        return 0.0
    first = min(s.start for s in on_one_clock)
    return max(0.0, max(s.end for s in on_one_clock) - first) / 3600
