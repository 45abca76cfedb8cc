"""The most a sweep of a kind and spec may take (runs, node-runs, node-hours), as its kind
says, and Slurm's time-limit forms: what the dry run, the views and the cost cap all read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.kinds.registry import kinds
from sweepd.util.hostlists import count_hostlist


def most_runs(kind: str, spec: Mapping[str, Any]) -> int | None:
    """The most runs a sweep of this kind and spec may make (None: no fixed bound, e.g. a
    network sweep's group testing goes on until its faults are isolated): the kind says."""
    found = kinds().get(kind)
    bound = found.budget.runs if found else None
    return bound(spec) if bound else None


def unbounded_why(kind: str) -> str:
    """Why a kind's sweep has no fixed most runs, in one line (the kind's own words)."""
    found = kinds().get(kind)
    why = found.budget.unbounded if found else None
    return why or "the kind sets no most"


def most_node_runs(kind: str, spec: Mapping[str, Any]) -> int | None:
    """The most node-runs (nodes x runs, summed) a sweep may take: node-hours per job-hour.
    By default each run takes every pinned node; a kind whose runs take fewer says so."""
    found = kinds().get(kind)
    bound = found.budget.node_runs if found else None
    if bound:
        return bound(spec)
    most = most_runs(kind, spec)
    return None if most is None else most * count_hostlist(str(spec.get("nodes", "")))


def kind_node_hours(kind: str, spec: Mapping[str, Any], retries: int
                    ) -> tuple[float, str] | None:
    """The most node-hours and their basis where the kind bounds them itself (None: it
    does not; the configured time limit or earlier jobs decide)."""
    found = kinds().get(kind)
    bound = found.budget.node_hours if found else None
    return bound(spec, retries) if bound else None


def slurm_seconds(limit: str) -> float | None:
    """Slurm's --time forms (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`)."""
    days, _, rest = limit.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        day_s = int(days) * 86400 if days else 0
    except ValueError:
        return None
    if days:   # D-HH[:MM[:SS]]
        units = [3600, 60, 1][:len(parts)]
    else:      # MM, MM:SS, HH:MM:SS
        units = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}.get(len(parts), [])
    if len(units) != len(parts):
        return None
    return day_s + sum(p * u for p, u in zip(parts, units, strict=True))
