"""The model perf sweep's result table (batch-sweep.SKILL.md Step 8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.reports.plots import perf_curve_plot
from sweepd.specs import expand_nodes
from sweepd.store.rows import Job, Run, Sweep

_STATUS = {"pass": "works", "oom": "OOM", "hang": "hang", "fail": "failed"}


def _sort_key(run: Run, parameter: str) -> tuple[int, Any]:
    v = run.params.get(parameter)
    return (0, v) if isinstance(v, int | float) else (1, str(v))


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    parameter = sweep.spec.get("parameter", "per_device_batch_size")
    best = (sweep.verdict or {}).get("best")
    last_job = {j.run_id: j for j in jobs}  # jobs are in id order: the last attempt wins
    out = []
    finished = [r for r in runs if r.state in ("passed", "failed")]
    # After an exclusion the search started over on fewer nodes; runs on another node
    # count are listed, but were not compared with the verdict's.
    size = (sweep.verdict or {}).get("nodes") or len(expand_nodes(sweep.spec["nodes"]))
    compared = [r for r in finished if len(expand_nodes(r.nodes)) == size]
    top_tgs = max((r.tgs or 0.0 for r in compared if r.outcome == "pass"), default=0.0)
    for r in sorted(finished, key=lambda r: _sort_key(r, parameter)):
        value = r.params.get(parameter)
        status = _STATUS.get(r.outcome or "", r.outcome or "?")
        if r not in compared:
            status += f" (on {len(expand_nodes(r.nodes))}N)"
        elif r.outcome == "pass" and value == best:
            status += " ← optimum"
        elif r.outcome == "pass" and r.tgs is not None and r.tgs < top_tgs and \
                best is not None and _after(value, best):
            status += " (regression)"
        job = last_job.get(r.id)
        out.append({"value": value, "job": job.backend_id if job else None, "tgs": r.tgs,
                    "mfu": r.mfu, "outcome": r.outcome, "status": status,
                    "failure_class": r.failure_class, "detail": r.detail})
    return out


def _after(value: Any, best: Any) -> bool:
    try:
        return bool(value > best)
    except TypeError:
        return False


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    parameter = sweep.spec.get("parameter", "per_device_batch_size")
    head = "Batch" if parameter == "per_device_batch_size" else parameter
    lines = [f"| {head} | Job | Avg TGS/device | Avg MFU | Status |",
             "|-------|-----|----------------|---------|--------|"]
    for row in rows(sweep, runs, jobs):
        tgs = f"{row['tgs']:,.0f}" if row["tgs"] is not None else (
            "OOM" if row["outcome"] == "oom" else "—")
        mfu = f"{row['mfu']:.2f}%" if row["mfu"] is not None else "—"
        lines.append(f"| {row['value']} | {row['job'] or '—'} | {tgs} | {mfu} | {row['status']} |")
    return "\n".join(lines)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """TGS against the swept value with the OOM region and the optimum (numeric sweeps)."""
    parameter = sweep.spec.get("parameter", "per_device_batch_size")
    numeric = [r for r in runs if isinstance(r.params.get(parameter), int | float)]
    points = [(float(r.params[parameter]), r.tgs) for r in numeric
              if r.outcome == "pass" and r.tgs is not None]
    failed = [float(r.params[parameter]) for r in numeric if r.outcome in ("oom", "fail", "hang")]
    if not points and not failed:
        return None
    best = (sweep.verdict or {}).get("best")
    # The node count the plotted jobs ran on: fewer than pinned after an exclusion.
    plotted = {run.id for run in numeric}
    sizes = (sorted({len(expand_nodes(j.nodes)) for j in jobs if j.run_id in plotted and j.nodes})
             or [len(expand_nodes(sweep.spec["nodes"]))])
    size = f"{sizes[0]}N" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}N"
    title = f"{sweep.spec.get('model')} {size}: {parameter}"
    return perf_curve_plot(points, failed, float(best) if isinstance(best, int | float) else None,
                           parameter, title)
