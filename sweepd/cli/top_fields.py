"""What a sweep's JSON says, for `sweepd top`: the one place that reads its fields (progress,
TGS series, latest line, stop message) and the cell text of its runs and jobs tables. Pure:
no textual, no socket, so the list and the view can be checked to agree without a screen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.util.text import escape

FINISHED_RUNS = frozenset({"passed", "failed", "cancelled"})
STOPPED = frozenset({"done", "failed", "aborted", "awaiting_decision"})


def progress_of(sweep: Mapping[str, Any]) -> tuple[int, int | None]:
    """Runs finished, and the most runs the sweep may take (None: no fixed most). Reads
    the API's `progress` object (`runs_done`, `runs_most`) when the daemon sends one, else
    counts the runs itself (an older daemon)."""
    given = sweep.get("progress")
    if isinstance(given, Mapping) and isinstance(given.get("runs_done"), int):
        most = given.get("runs_most")
        return int(given["runs_done"]), int(most) if isinstance(most, int) else None
    runs = sweep.get("run_list") or []
    done = sum(1 for r in runs if r.get("state") in FINISHED_RUNS)
    spec = sweep.get("spec") or {}
    most = spec.get("max_runs")
    if isinstance(spec.get("values"), list) and isinstance(most, int):
        most = min(most, len(spec["values"]))   # explicit candidates: at most one run each
    if sweep.get("state") in STOPPED - {"awaiting_decision"}:
        most = done   # nothing more will run
    return done, int(most) if isinstance(most, int) else None


def progress_text(sweep: Mapping[str, Any]) -> str:
    """The daemon's one-line progress (runs, jobs in flight, elapsed, ETA), if it sends it,
    and where the running job is (`job 10018 step 10/15`, as `run`'s bar says it)."""
    given = sweep.get("progress")
    if not isinstance(given, Mapping) or not given.get("line"):
        return ""
    line = str(given["line"])
    job = given.get("current_job")
    if isinstance(job, Mapping) and job.get("job") is not None:
        line += f" · job {job['job']} step {job.get('steps_done', 0)}/{job.get('steps', '?')}"
    return escape(line)


def tgs_series(sweep: Mapping[str, Any]) -> list[float]:
    """Each finished run's TGS, in run order: the sweep's sparkline."""
    runs = sorted(sweep.get("run_list") or [], key=lambda r: r.get("seq", 0))
    return [float(r["tgs"]) for r in runs if isinstance(r.get("tgs"), int | float)]


def latest_line(sweep: Mapping[str, Any]) -> str:
    """The newest progress line's first line (a stop message's headline)."""
    lines = [e["reason"] for e in sweep.get("events") or [] if e.get("kind") == "progress"]
    return escape(lines[-1].strip().splitlines()[0]) if lines and lines[-1].strip() else ""


def stop_message(sweep: Mapping[str, Any]) -> str:
    """For a sweep awaiting a decision, the message it stopped with (the progress line
    written with its last move to awaiting_decision); for an ended one, its reason; for
    one still going, nothing."""
    if sweep.get("state") not in STOPPED:
        return ""
    if sweep.get("state") != "awaiting_decision":
        return escape(sweep.get("reason") or "", keep_newlines=True)
    events = sweep.get("events") or []
    stops = [i for i, e in enumerate(events) if e.get("kind") == "transition"
             and e.get("to_state") == "awaiting_decision" and e.get("run_id") is None]
    after = events[stops[-1]:] if stops else events
    lines = [e["reason"] for e in after if e.get("kind") == "progress"]
    return escape(lines[0] if lines else sweep.get("reason") or "", keep_newlines=True)


def cell(value: Any) -> str:
    """A runs or jobs table cell: "-" for nothing, big floats without decimals."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return escape(str(value))
