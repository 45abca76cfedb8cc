"""The model perf sweep's result table (batch-sweep.SKILL.md Step 8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.kinds.model_perf.params import ENV_PREFIX, swept_value
from sweepd.kinds.model_perf.plot import perf_curve_plot, perf_grid_plot
from sweepd.kinds.model_perf.spec import BATCH
from sweepd.store.rows import Job, Run, Scalar, Sweep
from sweepd.util.hostlists import expand_nodes

_STATUS = {"pass": "works", "oom": "OOM", "hang": "hang", "fail": "failed"}


def _value(sweep: Sweep, run: Run) -> Scalar | None:
    spec = sweep.spec
    return swept_value(spec.get("parameter", BATCH), run.params, spec.get("values"))


def _sort_key(sweep: Sweep, run: Run) -> tuple[int, Any]:
    v = _value(sweep, run)
    return (0, v) if isinstance(v, int | float) else (1, str(v))


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    best = (sweep.verdict or {}).get("best")
    last_job = {j.run_id: j for j in jobs}  # jobs are in id order: the last attempt wins
    out = []
    finished = [r for r in runs if r.state in ("passed", "failed")]
    compared = _compared(sweep, finished)
    # A value run twice is one point of the curve: its rows share its mean's status.
    passes: dict[Any, list[float]] = {}
    for r in compared:
        if r.outcome == "pass" and r.tgs is not None:
            passes.setdefault((_value(sweep, r), _second(sweep, r)), []).append(r.tgs)
    mean = {k: sum(ts) / len(ts) for k, ts in passes.items()}
    top_tgs = max(mean.values(), default=0.0)
    top_value = max((v for r in compared if r.outcome == "pass"
                     and isinstance(v := _value(sweep, r), int | float)), default=None)
    for r in sorted(finished, key=lambda r: _sort_key(sweep, r)):
        value = _value(sweep, r)
        status = _STATUS.get(r.outcome or "", r.outcome or "?")
        if r not in compared:
            status += f" (on {r.node_count}N)"
        elif r.outcome == "oom" and _after(top_value, value):
            # A compile hang counts as an OOM (SKILL.md), but memory does not shrink with
            # the batch: a larger value that ran says this one may not be memory at all.
            status += f" (yet {top_value} ran: check the log)"
        elif r.outcome == "pass" and value == best and _second(sweep, r) == \
                (sweep.verdict or {}).get("second_best"):
            status += " ← optimum" if (sweep.verdict or {}).get("settled", True) else \
                " ← best so far"
        elif r.outcome == "pass" and mean.get((value, _second(sweep, r)), top_tgs) < top_tgs \
                and best is not None and _after(value, best):
            status += " (regression)"
        job = last_job.get(r.id)
        out.append({"value": value, "second": _second(sweep, r),
                    "job": job.backend_id if job else None, "tgs": r.tgs,
                    "mfu": r.mfu, "outcome": r.outcome, "status": status,
                    "failure_class": r.failure_class, "detail": r.detail})
    return out


def _size(sweep: Sweep, runs: Sequence[Run]) -> int:
    """The node count the verdict was measured on; before there is one, the count the
    search is on now (its latest run's), else the pinned count."""
    if (sweep.verdict or {}).get("nodes"):
        return int((sweep.verdict or {})["nodes"])
    latest = max(runs, key=lambda r: r.seq, default=None)
    return latest.node_count if latest else len(expand_nodes(sweep.spec["nodes"]))


def _compared(sweep: Sweep, runs: Sequence[Run]) -> list[Run]:
    """After an exclusion the search starts over on the nodes left: runs on another node
    count are listed, but not compared with the verdict's."""
    size = _size(sweep, runs)
    return [r for r in runs if r.node_count == size]


def _after(value: Any, best: Any) -> bool:
    try:
        return bool(value > best)
    except TypeError:
        return False


def _second(sweep: Sweep, run: Run) -> Scalar | None:
    second = sweep.spec.get("second") or {}
    return swept_value(second["parameter"], run.params, second.get("values")) \
        if second else None


def grid_markdown(sweep: Sweep, runs: Sequence[Run]) -> str:
    """A two-parameter sweep: batch down, the second knob across, TGS (or what failed) in
    each cell; the winning combination starred."""
    second = sweep.spec["second"]
    name = str(second["parameter"]).removeprefix(ENV_PREFIX)
    columns = list(second["values"])
    verdict = sweep.verdict or {}
    cells: dict[tuple[Any, Any], str] = {}
    for r in _compared(sweep, [r for r in runs if r.state in ("passed", "failed")]):
        key = (_value(sweep, r), _second(sweep, r))
        if r.outcome == "pass" and r.tgs is not None:
            star = " ★" if key == (verdict.get("best"), verdict.get("second_best")) else ""
            cells[key] = f"{r.tgs:,.0f}{star}"
        else:
            cells.setdefault(key, _STATUS.get(r.outcome or "", r.outcome or "?"))
    batches = sorted({b for b, _ in cells}, key=lambda v: (0, v) if isinstance(v, int | float)
                     else (1, str(v)))
    if not batches:
        return "No run has finished yet."
    lines = [f"| Batch \\ {name} | " + " | ".join(map(str, columns)) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for b in batches:
        lines.append(f"| {b} | " + " | ".join(cells.get((b, c), "—") for c in columns) + " |")
    if verdict.get("best") is not None:
        what = "Winning combination" if verdict.get("settled", True) else \
            "Best so far (the search did not settle)"
        lines.append(f"\n{what}: per_device_batch_size={verdict['best']}, "
                     f"{name}={verdict.get('second_best')} (★, TGS/device).")
    return "\n".join(lines)


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    if sweep.spec.get("second"):
        return grid_markdown(sweep, runs)
    parameter = sweep.spec.get("parameter", "per_device_batch_size")
    head = "Batch" if parameter == "per_device_batch_size" else parameter
    table = rows(sweep, runs, jobs)
    if not table:
        return "No run has finished yet."
    lines = [f"| {head} | Job | Avg TGS/device | Avg MFU | Status |",
             "|-------|-----|----------------|---------|--------|"]
    for row in table:
        tgs = f"{row['tgs']:,.0f}" if row["tgs"] is not None else (
            "OOM" if row["outcome"] == "oom" else "—")
        mfu = f"{row['mfu']:.2f}%" if row["mfu"] is not None else "—"
        lines.append(f"| {row['value']} | {row['job'] or '—'} | {tgs} | {mfu} | {row['status']} |")
    pool = (sweep.verdict or {}).get("pool")
    if pool:   # where the pool the search read came from (model_perf/pool.py)
        lines += ["", f"The search's {pool}."]
    return "\n".join(lines)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """TGS against the swept value with the OOM region and the optimum (numeric sweeps);
    a two-parameter sweep: one curve per value of the second knob."""
    parameter = sweep.spec.get("parameter", "per_device_batch_size")
    if sweep.spec.get("second"):
        return _grid_plot(sweep, runs, parameter)
    numeric = [(float(v), r) for r in _compared(sweep, runs)
               if isinstance(v := _value(sweep, r), int | float)]
    points = [(v, r.tgs) for v, r in numeric if r.outcome == "pass" and r.tgs is not None]
    failed = [v for v, r in numeric if r.outcome in ("oom", "fail", "hang")]
    if not points and not failed:
        return None
    best = (sweep.verdict or {}).get("best")
    title = f"{sweep.spec.get('model')} {_size(sweep, runs)}N: {parameter}"
    return perf_curve_plot(points, failed, float(best) if isinstance(best, int | float) else None,
                           parameter, title)


def _grid_plot(sweep: Sweep, runs: Sequence[Run], parameter: str) -> bytes | None:
    second = sweep.spec["second"]
    curves: dict[str, list[tuple[float, float]]] = {str(v): [] for v in second["values"]}
    failed: dict[str, list[float]] = {str(v): [] for v in second["values"]}
    for r in _compared(sweep, runs):
        v, s = _value(sweep, r), str(_second(sweep, r))
        if not isinstance(v, int | float) or s not in curves:
            continue
        if r.outcome == "pass" and r.tgs is not None:
            curves[s].append((float(v), r.tgs))
        elif r.outcome in ("oom", "fail", "hang"):
            failed[s].append(float(v))
    if not any(curves.values()) and not any(failed.values()):
        return None
    verdict = sweep.verdict or {}
    best = verdict.get("best")
    win = (float(best), str(verdict.get("second_best"))) \
        if isinstance(best, int | float) else None
    name = str(second["parameter"]).removeprefix(ENV_PREFIX)
    title = f"{sweep.spec.get('model')} {_size(sweep, runs)}N: {parameter} x {name}"
    return perf_grid_plot(curves, failed, win, parameter, name, title)
