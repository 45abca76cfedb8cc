"""Where a sweep is: runs done of the most it may take, jobs now, elapsed time and an ETA.

One computation for every view (`list`, `show`, `watch`, `top`, the API's sweep JSON), from
the store's rows only: nothing here is remembered between calls. The ETA rests on the
cluster time the sweep's finished jobs took (submission to end, queueing included) and is
labelled a guess while few jobs have finished.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sweepd.core.states import JobState, RunState, SweepState
from sweepd.kinds.registry import kinds
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util.hostlists import count_hostlist

# Fewer finished jobs than this: the ETA is called a guess.
SURE_AFTER_JOBS = 3
_FINISHED_RUNS = (RunState.PASSED, RunState.FAILED, RunState.CANCELLED)
_ENDED_JOBS = (JobState.DONE, JobState.FAILED)
_STOPPED = (SweepState.DONE, SweepState.FAILED, SweepState.ABORTED)


def most_runs(kind: str, spec: Mapping[str, Any]) -> int | None:
    """The most runs a sweep of this kind and spec may make (None: no fixed bound, e.g. a
    network sweep's group testing goes on until its faults are isolated): the kind says."""
    found = kinds().get(kind)
    return found.most_runs(spec) if found and found.most_runs else None


def most_node_runs(kind: str, spec: Mapping[str, Any]) -> int | None:
    """The most node-runs (nodes x runs, summed) a sweep may take: node-hours per job-hour.
    By default each run takes every pinned node; a kind whose runs take fewer says so."""
    found = kinds().get(kind)
    if found and found.most_node_runs:
        return found.most_node_runs(spec)
    most = most_runs(kind, spec)
    return None if most is None else most * count_hostlist(str(spec.get("nodes", "")))


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


def _seconds_between(start: str, end: datetime) -> float:
    return max(0.0, (end - datetime.fromisoformat(start)).total_seconds())


def job_seconds(jobs: Sequence[Job]) -> list[float]:
    """Cluster seconds each ended job took, submission to end."""
    return [j.ended_at - j.submitted_at for j in jobs
            if j.state in _ENDED_JOBS and j.ended_at is not None and j.submitted_at is not None]


def peak_parallel(jobs: Sequence[Job]) -> int:
    """The most jobs the sweep had in the cluster at once (a node perf sweep runs one per
    node together; a batch search one at a time): how many of the runs left run together."""
    marks = sorted([(j.submitted_at, 1) for j in jobs if j.submitted_at is not None]
                   + [(j.ended_at, -1) for j in jobs
                      if j.submitted_at is not None and j.ended_at is not None])
    peak = now = 0
    for _, step in marks:   # at equal times an end (-1) sorts before a start
        now += step
        peak = max(peak, now)
    return peak


def sweep_progress(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
                   now: datetime | None = None) -> dict[str, Any]:
    """The sweep's progress as JSON-ready data, with `line`, its one-line summary."""
    now = now or datetime.now(UTC)
    done = sum(r.state in _FINISHED_RUNS for r in runs)
    most = most_runs(sweep.kind, sweep.spec)
    queued = sum(j.state in (JobState.SUBMITTING, JobState.QUEUED) for j in jobs)
    running = sum(j.state in (JobState.RUNNING, JobState.HUNG) for j in jobs)
    stopped = sweep.state in _STOPPED
    elapsed = _seconds_between(sweep.created_at, datetime.fromisoformat(sweep.updated_at)
                               if stopped else now)
    durations = job_seconds(jobs)
    out: dict[str, Any] = {
        "runs_started": len(runs), "runs_done": done, "runs_most": most,
        "jobs_queued": queued, "jobs_running": running, "jobs_finished": len(durations),
        "elapsed_s": round(elapsed, 1), "eta_s": None, "eta_guess": True,
        "eta_basis": "no job has finished yet",
    }
    if stopped:
        out.update(eta_s=0.0, eta_guess=False, eta_basis="the sweep has ended")
    elif durations and most is not None:
        mean = sum(durations) / len(durations)
        waves = math.ceil(max(most - done, 0) / max(1, queued + running, peak_parallel(jobs)))
        out.update(eta_s=round(mean * waves, 1), eta_guess=len(durations) < SURE_AFTER_JOBS,
                   eta_basis=f"{len(durations)} finished job(s) took {duration(mean)} each "
                             "(cluster time) on average; to the most runs")
    elif durations:
        out["eta_basis"] = "this kind has no fixed number of runs"
    out["line"] = progress_line(out)
    return out


def duration(seconds: float) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def progress_line(p: Mapping[str, Any]) -> str:
    """`run 4 of ≤ 12 · 1 running · 12m elapsed · ETA ≤ 30m (guess)`."""
    most = p["runs_most"]
    parts = [f"run {p['runs_started']} of ≤ {most}" if most is not None
             else f"run {p['runs_started']} (no fixed most)"]
    if p["runs_done"] != p["runs_started"]:
        parts[0] += f" ({p['runs_done']} done)"
    jobs = [f"{p[k]} {k.removeprefix('jobs_')}" for k in ("jobs_queued", "jobs_running") if p[k]]
    parts.append(", ".join(jobs) if jobs else "no job in flight")
    parts.append(f"{duration(p['elapsed_s'])} elapsed")
    if p["eta_s"] is None:
        parts.append("ETA unknown")
    elif p["eta_s"] > 0:
        parts.append(f"ETA ≤ {duration(p['eta_s'])} cluster time"
                     + (" (a guess)" if p["eta_guess"] else ""))
    return " · ".join(parts)
