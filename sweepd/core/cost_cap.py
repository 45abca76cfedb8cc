"""The cost cap: a sweep stops before submitting the job that would take it past its
node-hour cap (`applied_cap`): the spec's `max_node_hours`, else the larger of the most
node-hours the sweep may take as `validate` states them (`stated_most`) and the 8 h
timebox x its nodes, so that a sweep that behaves as planned never meets it.

What it has taken: every job's span (store/spans.span_of: the log's cluster time, else
submission to end) x the nodes it ran on, summed in the store by one query per submission
(`JobsTable.span_totals`), not read job by job. What the next job would take: the mean span of
the sweep's ended jobs x the next job's nodes; before any job has ended, nothing is known
and nothing is stopped (a first job is never refused on a guess)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweepd.config import Config
from sweepd.core.budgets import kind_node_hours, most_node_runs, slurm_seconds
from sweepd.kinds.spec import TIMEBOX_HOURS, SweepSpec, node_hour_cap
from sweepd.store.spans import SpanTotal
from sweepd.util.hostlists import expand_nodes

RULE = "budget.node_hours"


@dataclass(frozen=True)
class AppliedCap:
    """The node-hour cap a sweep stops at, and where it comes from (said by `validate` and
    in the sweep's first event)."""

    hours: float
    source: str
    # Where nothing bounds a job's time: the most node-jobs (nodes x jobs, every try) the
    # sweep may take; the cap grows to them at the mean its ended jobs took (on the
    # simulated cluster's clock a job spans up to hours), so a sweep that keeps to its
    # planned jobs never meets it. None: the cap is `hours` alone.
    node_jobs: int | None = None

    def said(self) -> str:
        return f"node-hour cap {self.hours:g} ({self.source})"


def stated_most(kind: str, spec: Mapping[str, Any], config: Config
                ) -> tuple[float, str] | None:
    """The most node-hours a sweep may take and their basis, where something bounds every
    job: the kind's own time limits, else the configured Slurm time limit x its most
    node-runs x every try. None: nothing does (no time limit: a job may run on)."""
    retries = config.policy.max_retries
    own = kind_node_hours(kind, spec, retries)
    if own is not None:
        return own
    limit = config.cluster.slurm.time_limit
    job_s = slurm_seconds(limit) if limit and config.cluster.backend == "slurm" else None
    node_runs = most_node_runs(kind, spec)
    if job_s is None or node_runs is None:
        return None
    return (round(node_runs * (1 + retries) * job_s / 3600, 2),
            f"the configured time limit {limit} per job")


def applied_cap(spec: SweepSpec, config: Config) -> AppliedCap:
    """The spec's `max_node_hours`; else the SKILL.md's 8 h timebox on every node of the
    spec, or the sweep's stated most (`stated_most`) where that is larger (an XLA tuning
    sweep's last wave runs past its timebox), so a sweep that keeps to its plan never
    meets the cap and one that runs away does."""
    # A spec kept without its nodes (the local backend's one node, or one stored before a
    # field existed) is one node: never a cap of 0 that would stop its first job.
    named = str(getattr(spec, "nodes", "") or "")
    nodes = max(1, len(expand_nodes(named))) if named else 1
    dumped = spec.model_dump(mode="json")
    # The stated most is read only where no max_node_hours makes it moot.
    most = None if spec.max_node_hours is not None else stated_most(spec.kind, dumped, config)
    hours, source = node_hour_cap(spec.max_node_hours, nodes, most[0] if most is not None else None)
    if source == "max_node_hours":
        return AppliedCap(hours, "the spec's max_node_hours")
    box = f"the {TIMEBOX_HOURS:g} h timebox x {nodes} node{'s' if nodes != 1 else ''}"
    if source == "most":
        return AppliedCap(hours, f"the most this sweep may take, above {box}; "
                                 "max_node_hours sets another")
    if most is not None:
        return AppliedCap(hours, f"{box}; max_node_hours sets another")
    node_runs = most_node_runs(spec.kind, dumped)
    if node_runs is None:
        return AppliedCap(hours, f"{box}; max_node_hours sets another")
    jobs = node_runs * (1 + config.policy.max_retries)
    return AppliedCap(hours, f"{box}, or its most {jobs} node-jobs at the mean its jobs "
                             "take where larger; max_node_hours sets another", jobs)


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
                f"for the next job would pass the node-hour cap {self.cap:g}")


def check_cap(totals: Sequence[SpanTotal], next_nodes: int, cap: float,
              node_jobs: int | None = None) -> CapCheck:
    """The check before a job, from the sweep's other jobs' spans summed by node set
    (`JobsTable.span_totals`: one aggregate query, not every job's row)."""
    spent = sum(t.seconds / 3600 * len(expand_nodes(t.nodes)) for t in totals)
    ended = sum(t.ended for t in totals)
    mean = sum(t.ended_seconds for t in totals) / 3600 / ended if ended else 0.0
    if node_jobs is not None:
        cap = max(cap, round(node_jobs * mean, 2))
    return CapCheck(spent=spent, next_job=mean * next_nodes, cap=cap)
