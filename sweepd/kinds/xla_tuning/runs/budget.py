"""The most a sweep may take, said before it starts (`sweepd validate`): runs and node-hours
from the spec's caps. Runs: `max_runs` (None: no cap; the 8 h timebox bounds the time, not
the count). Node-hours: the nodes of every job times the least of the two time bounds: the
queue-time timebox (`thresholds.max_queue_hours`) plus a last wave still running (waves are
cut to the runs that start inside it, at the mean run so far, so at most one wave of jobs,
and the baseline beside a claim, runs past it, each at most its time limit), and
`max_runs` jobs (each tried 1 + the policy's retries times) at their time limit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hostlist import expand_hostlist

from sweepd.kinds.xla_tuning.runs.run_params import EVIDENCE_TIME
from sweepd.kinds.xla_tuning.spec import Thresholds

# The spec's own defaults (its timebox and wave size), read from the spec, not copied.
_DEFAULTS = Thresholds()


def _hours(limit: str) -> float:
    """`MM:SS` (the kind's own per-job limits) in hours."""
    minutes, _, seconds = limit.partition(":")
    return (int(minutes) * 60 + int(seconds or 0)) / 3600


def most_runs(spec: Mapping[str, Any]) -> int | None:
    cap = spec.get("max_runs")
    return int(cap) if isinstance(cap, int) else None


def _nodes(spec: Mapping[str, Any]) -> int:
    listed = str(spec.get("nodes") or "")
    count = spec.get("node_count")
    return len(expand_hostlist(listed)) if listed else int(count or 0)


def node_hours(spec: Mapping[str, Any], retries: int) -> tuple[float, str] | None:
    """(the most node-hours, how they were bounded); None: no node is known yet."""
    nodes = _nodes(spec)
    if nodes <= 0:
        return None
    job_h = _hours(EVIDENCE_TIME)   # the longest job's time limit (45:00, the evidence 50:00)
    t = spec.get("thresholds") or {}
    box = float(t.get("max_queue_hours", _DEFAULTS.max_queue_hours))
    last = int(t.get("wave_size", _DEFAULTS.wave_size)) + 1
    hours = box + last * job_h
    basis = (f"{nodes} node(s) x ({box:g} h timebox + a last wave of {last} jobs past it at "
             f"their {EVIDENCE_TIME} time limit)")
    runs = most_runs(spec)
    if runs is not None and runs * (1 + retries) * job_h < hours:
        hours = runs * (1 + retries) * job_h
        basis = (f"{nodes} node(s) x max_runs {runs} x {1 + retries} tries x their "
                 f"{EVIDENCE_TIME} time limit")
    return round(nodes * hours, 2), basis
