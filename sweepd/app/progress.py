"""Where a sweep is: runs done of the most it may take, jobs now, elapsed time and an ETA.

One computation for every view (`list`, `show`, `watch`, `top`, the API's sweep JSON), from
the store's rows only: nothing here is remembered between calls. The ETA rests on the
cluster time the sweep's finished jobs took (submission to end, queueing included) and is
labelled a guess while few jobs have finished. Elapsed time is shown on the same base as
the ETA (cluster time, once a job was submitted) and the line says which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sweepd.core.budgets import most_runs
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.states import JobState, RunState, SweepState

# Fewer finished jobs than this: the ETA is called a guess.
SURE_AFTER_JOBS = 3
_FINISHED_RUNS = (RunState.PASSED, RunState.FAILED, RunState.CANCELLED)
_ENDED_JOBS = (JobState.DONE, JobState.FAILED)
_STOPPED = (SweepState.DONE, SweepState.FAILED, SweepState.ABORTED)
# The spec's default step count (kinds/spec.py `steps`), where neither the run nor the spec
# names one.
DEFAULT_STEPS = 15
# Cells of the terminal bar (`bar_line`).
BAR_CELLS = 20


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


def _ran(run: Run, jobs: Sequence[Job]) -> bool:
    """Whether the run got to run: it finished, or one of its jobs printed a line (a run
    cancelled while queued never ran)."""
    if run.state in (RunState.PASSED, RunState.FAILED):
        return True
    return any(j.run_id == run.id and j.last_output_at is not None for j in jobs)


def cluster_elapsed(jobs: Sequence[Job]) -> float | None:
    """Cluster seconds from the sweep's first submission to the latest time the scheduler
    reported for any of its jobs (a submission, a line, an end); None before any job."""
    starts = [j.submitted_at for j in jobs if j.submitted_at is not None]
    if not starts:
        return None
    marks = [t for j in jobs for t in (j.submitted_at, j.last_output_at, j.ended_at)
             if t is not None]
    return max(marks) - min(starts)


def _elapsed(sweep: Sweep, jobs: Sequence[Job], now: datetime) -> tuple[float, str]:
    """One time base for elapsed and ETA: the cluster's (the ETA rests on jobs' cluster
    seconds; the simulated cluster's clock runs faster than the wall's), else before any
    job the wall clock since submission."""
    cluster = cluster_elapsed(jobs)
    if cluster is not None:
        return cluster, "cluster time"
    end = datetime.fromisoformat(sweep.updated_at) if sweep.state in _STOPPED else now
    return _seconds_between(sweep.created_at, end), "wall clock"


def current_job(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]
                ) -> dict[str, Any] | None:
    """The sweep's newest running job and where its log is: `last_step` the latest
    `completed step: N` recorded (steps count from 0), `steps_done` N + 1 of `steps` (the
    run's `steps` override, else the spec's); None while no job runs."""
    running = [j for j in jobs if j.state in (JobState.RUNNING, JobState.HUNG)]
    if not running:
        return None
    job = max(running, key=lambda j: j.id)
    run = next((r for r in runs if r.id == job.run_id), None)
    steps = run.params.overrides.get("steps") if run is not None else None
    if not isinstance(steps, int) or isinstance(steps, bool):
        spec_steps = sweep.spec.get("steps", DEFAULT_STEPS)
        steps = spec_steps if isinstance(spec_steps, int) else DEFAULT_STEPS
    return {"job": job.backend_id or str(job.id), "last_step": job.last_step,
            "steps_done": 0 if job.last_step is None else job.last_step + 1, "steps": steps}


def sweep_progress(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job],
                   now: datetime | None = None) -> dict[str, Any]:
    """The sweep's progress as JSON-ready data, with `line`, its one-line summary."""
    now = now or datetime.now(UTC)
    stopped = sweep.state in _STOPPED
    # An ended sweep's runs are complete: those that ran, of those that ran.
    started = sum(_ran(r, jobs) for r in runs) if stopped else len(runs)
    done = started if stopped else sum(r.state in _FINISHED_RUNS for r in runs)
    planned = most_runs(sweep.kind, sweep.spec)
    most = started if stopped else planned
    if most is not None and started > most:
        # A resume went on past the spec's most (a budget stop agreed to, extend_budget, a
        # value run again): the most is at least what started, never fewer.
        most = started
    queued = sum(j.state in (JobState.SUBMITTING, JobState.QUEUED) for j in jobs)
    running = sum(j.state in (JobState.RUNNING, JobState.HUNG) for j in jobs)
    elapsed, base = _elapsed(sweep, jobs, now)
    durations = job_seconds(jobs)
    out: dict[str, Any] = {
        "runs_started": started, "runs_done": done, "runs_most": most, "ended": stopped,
        "runs_planned": planned,
        "jobs_queued": queued, "jobs_running": running, "jobs_finished": len(durations),
        "elapsed_s": round(elapsed, 1), "time_base": base, "eta_s": None, "eta_guess": True,
        "eta_basis": "no job has finished yet",
        "current_job": None if stopped else current_job(sweep, runs, jobs),
    }
    if stopped:
        out.update(eta_s=0.0, eta_guess=False, eta_basis="the sweep has ended")
    elif sweep.state == SweepState.AWAITING_DECISION:
        out.update(eta_s=0.0, eta_guess=False, eta_basis="the sweep awaits a decision")
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


def _runs_part(p: Mapping[str, Any]) -> str:
    if p.get("ended"):
        n = p["runs_done"]
        return "no run ran" if n == 0 else f"{n} run{'s' if n != 1 else ''} ran, all ended"
    most, planned = p["runs_most"], p.get("runs_planned")
    if most is not None and planned is not None and most > planned:
        text = f"run {p['runs_started']} (past the {planned} planned: resumed or extended)"
    else:
        text = (f"run {p['runs_started']} of ≤ {most}" if most is not None
                else f"run {p['runs_started']} (no fixed most)")
    if p["runs_done"] != p["runs_started"]:
        text += f" ({p['runs_done']} done)"
    return text


def progress_line(p: Mapping[str, Any]) -> str:
    """`run 4 of ≤ 12 · 1 running · 12m elapsed, ETA ≤ 30m (cluster time, a guess)`.

    Jobs are named only when some are in flight: a line read between one job's end and
    the engine's next plan must not say that nothing will run."""
    parts = [_runs_part(p)]
    jobs = [f"{p[k]} {k.removeprefix('jobs_')}" for k in ("jobs_queued", "jobs_running") if p[k]]
    if jobs:
        parts.append(", ".join(jobs))
    base = p.get("time_base", "cluster time")
    time = f"{duration(p['elapsed_s'])} elapsed"
    if p["eta_s"] is None:
        time += f" ({base}), ETA unknown"
    elif p["eta_s"] > 0:
        time += f", ETA ≤ {duration(p['eta_s'])} ({base}" \
            + (", a guess)" if p["eta_guess"] else ")")
    else:
        time += f" ({base})"
    parts.append(time)
    return " · ".join(parts)


def _eta_part(p: Mapping[str, Any]) -> str | None:
    if p["eta_s"] is None:
        return "ETA unknown"
    if p["eta_s"] > 0:
        return f"ETA ≤ {duration(p['eta_s'])}" + (", a guess" if p["eta_guess"] else "")
    return None


def bar_line(p: Mapping[str, Any], cells: int = BAR_CELLS) -> str:
    """The terminal bar of `run` and `watch`, from the same figures as `progress_line`:
    `run 4 of ≤ 12 ▕████░░░░▏ 33 % · job 10018 step 10/15 · ETA ≤ 1h46m`."""
    parts = [_runs_part(p)]
    most = p["runs_most"]
    if most:
        frac = min(1.0, p["runs_done"] / most)
        full = round(frac * cells)
        parts[0] += f" ▕{'█' * full}{'░' * (cells - full)}▏ {math.floor(frac * 100)} %"
    job = p.get("current_job")
    if job:
        parts.append(f"job {job['job']} step {job['steps_done']}/{job['steps']}")
    eta = _eta_part(p)
    if eta:
        parts.append(eta)
    return " · ".join(parts)
