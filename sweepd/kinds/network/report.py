"""The network sweep's isolation table (batch-sweep.SKILL.md "Node network health sweep"
step 6), the verdict with its evidence, and the exclusion recommendation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.kinds.network.plot import ratio_bars_plot
from sweepd.store.rows import Job, Run, Sweep


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The verdict's judged tests once finished; before that, the runs as they stand."""
    last_job = {j.run_id: j for j in jobs}   # jobs are in id order: the last attempt wins
    by_nodes = {r.nodes: r for r in runs}
    verdict = sweep.verdict or {}
    if "tests" in verdict:
        out = []
        for t in verdict["tests"]:
            run = by_nodes.get(t["nodes"])
            job = last_job.get(run.id) if run else None
            out.append({**t, "job": job.backend_id if job else None})
        return out
    return [{"wave": None, "role": r.label.split(" ")[0], "nodes": r.nodes, "tgs": r.tgs,
             "expected": None, "delta": None,
             "status": r.state if r.state not in ("passed", "failed") else
             ("done" if r.outcome == "pass" else r.outcome or "failed"),
             "job": (j.backend_id if (j := last_job.get(r.id)) else None)} for r in runs]


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    lines = ["| Group | Nodes | Job | TGS/device | vs. expected | Status |",
             "|-------|-------|-----|------------|--------------|--------|"]
    for row in rows(sweep, runs, jobs):
        group = f"w{row['wave']} {row['role']}" if row["wave"] else row["role"]
        tgs = f"{row['tgs']:,.0f}" if row["tgs"] is not None else "failed"
        if row["tgs"] is None and row["status"] not in ("DEGRADED", "healthy"):
            tgs = "—"
        elif row["tgs"] is None and row["status"] == "healthy":
            tgs = "trained (not measured)"   # failure-only: steps short of the steady window
        vs = f"{row['delta']:+.1%}" if row["delta"] is not None else "—"
        lines.append(f"| {group} | {row['nodes']} | {row['job'] or '—'} | {tgs} | {vs} | "
                     f"{row['status']} |")
    return "\n".join(lines) + "\n\n" + notes(sweep, runs, jobs)


def notes(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    verdict = sweep.verdict or {}
    if "faults" not in verdict:
        return ""
    lines = [f"Expected TGS from {verdict['expected_source']}; {verdict['jobs']} jobs in "
             f"{verdict['rounds']} rounds.", ""]
    if not verdict["faults"]:
        lines.append(f"Verdict: {verdict['recommendation']}.")
    for f in verdict["faults"]:
        lines.append(f"Verdict: **{f['diagnosis']}**")
        lines += [f"- {e}" for e in f["evidence"]]
    if verdict["faults"]:
        lines += ["", f"Recommendation: {verdict['recommendation']}."]
    return "\n".join(lines)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes | None:
    """Each tested group's TGS against what was expected (finished sweeps)."""
    table = [r for r in rows(sweep, runs, jobs) if r.get("expected")]
    if not table:
        return None
    labels = [f"w{r['wave']} {r['role']} {r['nodes']}" for r in table]
    ratios = [r["tgs"] / r["expected"] if r["tgs"] is not None else None for r in table]
    limit = float(sweep.spec.get("tolerance", 0.05))
    return ratio_bars_plot(labels, ratios, limit, f"network sweep {sweep.id}")
