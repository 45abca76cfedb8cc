"""The node perf sweep's per-node table (batch-sweep.SKILL.md "Node perf sweep" step 4),
the healthy node list ready for `-w`, and the bar chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hostlist

from sweepd.kinds.node_perf.plan import Assessment, assess
from sweepd.kinds.node_perf.plot import node_perf_plot
from sweepd.store.rows import Job, Run, Sweep
from sweepd.util.hostlists import expand_nodes

_SHOWN = {"degraded": "DEGRADED", "unhealthy": "UNHEALTHY"}


def _assessment(sweep: Sweep, runs: Sequence[Run]) -> Assessment:
    spec = sweep.spec
    return assess(expand_nodes(spec["nodes"]), runs, spec.get("reference_tgs"))


def rows(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    last_job = {j.run_id: j for j in jobs}   # jobs are in id order: the last attempt wins
    out = []
    for r in _assessment(sweep, runs).nodes:
        ids = [last_job[i].backend_id for i in r.run_ids if i in last_job]
        out.append({**r.as_dict(), "jobs": [i for i in ids if i]})
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.1%}"


def markdown(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    found = _assessment(sweep, runs)
    ref = found.reference is not None
    head = "| Node | Job | TGS/device | vs. median |" + (" vs. reference |" if ref else "")
    lines = [head + " Status |",
             "|------|-----|------------|------------|" + ("---------------|" if ref else "")
             + "--------|"]
    for row in rows(sweep, runs, jobs):
        tgs = f"{row['tgs']:,.0f}" if row["tgs"] is not None else "—"
        status = _SHOWN.get(row["status"], row["status"])
        if row["status"] == "unhealthy" and row["failure"]:
            status += f" ({row['failure']})"
        if len(row["runs"]) > 1:
            shown = ", ".join("failed" if v is None else f"{v:,.0f}" for v in row["runs"])
            status += f" (runs: {shown}; {'confirmed' if row['confirmed'] else 'cleared'})"
        jobs_cell = ", ".join(row["jobs"]) or "—"
        cells = [row["node"], jobs_cell, tgs, _pct(row["delta"])]
        cells += [_pct(row["ref_delta"])] if ref else []
        lines.append("| " + " | ".join([*cells, status]) + " |")
    lines.append("")
    if found.median is not None:
        lines.append(f"Median: {found.median:,.0f} TGS/device.")
    if found.cluster_delta is not None:
        slow = " — the cluster is slow as a whole" if found.cluster_delta <= -0.05 else ""
        lines.append(f"Median vs reference {found.reference:,.0f}: "
                     f"{found.cluster_delta:+.1%}{slow}.")
    usable = found.usable
    if usable:
        lines.append(f"Recommended nodelist (healthy and marginal): "
                     f"`-w {hostlist.collect_hostlist(usable)}`")
    return "\n".join(lines)


def plot(sweep: Sweep, runs: Sequence[Run], jobs: Sequence[Job]) -> bytes:
    found = _assessment(sweep, runs)
    return node_perf_plot([(r.node, r.tgs, r.status) for r in found.nodes], found.median,
                          title=f"Sweep {sweep.id}: TGS/device per node")
