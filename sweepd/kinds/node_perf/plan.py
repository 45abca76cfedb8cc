"""Node perf sweep planning: a 1-node run per node, a second run to confirm any node judged
marginal or degraded, then a verdict per node against the median (batch-sweep.SKILL.md
"Node perf sweep"; the re-run follows prior-art.md: the bands sit inside run-to-run noise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

import hostlist

from sweepd.kinds.api import Finished, NewRun, Plan, SweepContext, open_runs
from sweepd.kinds.node_perf.rules import BASELINE, CONFIRM
from sweepd.kinds.node_perf.spec import NodePerfSpec
from sweepd.store.rows import Run, RunParams

HEALTHY_BAND = -0.02    # within ±2% of the median (faster is fine too)
DEGRADED_BAND = -0.05   # 5% or more below the median
CONFIRM_SUFFIX = "#2"
SEVERITY = {"healthy": 0, "marginal": 1, "degraded": 2, "unhealthy": 3, "pending": 4}


def band(delta: float) -> str:
    if delta <= DEGRADED_BAND:
        return "degraded"
    return "marginal" if delta < HEALTHY_BAND else "healthy"


def first_label(node: str) -> str:
    return f"node={node}"


def confirm_label(node: str) -> str:
    return f"node={node}{CONFIRM_SUFFIX}"


@dataclass(frozen=True)
class NodeResult:
    node: str
    tgs: float | None           # the TGS the verdict rests on (best of the runs)
    delta: float | None         # vs the median
    ref_delta: float | None     # vs the reference TGS, when one is given
    status: str                 # healthy | marginal | degraded | unhealthy | pending
    runs: tuple[float | None, ...]   # TGS of each finished run (None: failed/hung)
    confirmed: bool             # a second run agreed with a marginal/degraded first run
    needs_confirm: bool
    run_ids: tuple[int, ...]
    failure: str | None = None  # why its last failed run failed (e.g. gpu_hardware, hang)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "tgs": self.tgs, "delta": self.delta,
                "ref_delta": self.ref_delta, "status": self.status, "runs": list(self.runs),
                "confirmed": self.confirmed, "failure": self.failure}


@dataclass(frozen=True)
class Assessment:
    median: float | None        # of the first runs that passed
    reference: float | None
    nodes: tuple[NodeResult, ...]

    @property
    def cluster_delta(self) -> float | None:
        if self.median is None or not self.reference:
            return None
        return self.median / self.reference - 1

    @property
    def usable(self) -> list[str]:
        return [r.node for r in self.nodes if r.status in ("healthy", "marginal")]


def _finished(run: Run) -> bool:
    return run.state in ("passed", "failed")


def _tgs(run: Run) -> float | None:
    return run.tgs if run.outcome == "pass" else None


def assess(nodes: Sequence[str], runs: Sequence[Run], reference: float | None) -> Assessment:
    """Each node's verdict from its runs; pure, so the planner and the report agree."""
    by_label: Mapping[str, Run] = {r.label: r for r in runs}
    firsts = {n: by_label.get(first_label(n)) for n in nodes}
    passed = [t for r in firsts.values() if r is not None and _finished(r)
              if (t := _tgs(r)) is not None]
    mid = median(passed) if passed else None
    out = []
    for node in nodes:
        first, second = firsts[node], by_label.get(confirm_label(node))
        done = [r for r in (first, second) if r is not None and _finished(r)]
        values = tuple(_tgs(r) for r in done)
        ids = tuple(r.id for r in (first, second) if r is not None)
        failed = [r.failure_class or r.outcome or "failed" for r in done if _tgs(r) is None]
        judged = _judge(node, values, ids, mid, reference, second is not None,
                        second is not None and second in done)
        out.append(replace(judged, failure=failed[-1] if failed else None))
    return Assessment(mid, reference, tuple(out))


def _judge(node: str, values: tuple[float | None, ...], ids: tuple[int, ...],
           mid: float | None, reference: float | None, asked: bool,
           answered: bool) -> NodeResult:
    good = [v for v in values if v is not None]
    if not values or mid is None:
        return NodeResult(node, None, None, None, "pending", values, False, False, ids)
    if not good:
        # A 1-node job that fails or hangs is the node's own fault: no confirmation needed.
        return NodeResult(node, None, None, None, "unhealthy", values, False, False, ids)
    # A re-run that passes clears the node (pass on the first passing run): take the best.
    best = max(good)
    delta = best / mid - 1
    ref_delta = best / reference - 1 if reference else None
    status = band(delta)
    first_bad = band(good[0] / mid - 1) != "healthy" if values[0] is not None else False
    needs = first_bad and not asked
    if first_bad and not answered:
        status = "pending"
    return NodeResult(node, best, delta, ref_delta, status, values,
                      answered and status != "healthy", needs, ids)


def _params(node: str, overrides: Mapping[str, Any]) -> RunParams:
    synthetic = {} if "dataset_type" in overrides else {"dataset_type": "synthetic"}
    return RunParams(alias=node, overrides=synthetic)


def baseline_runs(spec: NodePerfSpec, nodes: Sequence[str], runs: Sequence[Run]
                  ) -> list[NewRun]:
    """`node_perf.baseline`: each node without its first run runs alone, all in parallel."""
    labels = {r.label for r in runs}
    return [NewRun(first_label(n), _params(n, spec.overrides), [n],
                   f"1-node baseline on {n} (all nodes in parallel)", BASELINE.id)
            for n in nodes if first_label(n) not in labels]


def confirm_runs(spec: NodePerfSpec, nodes: Sequence[str], runs: Sequence[Run]
                 ) -> list[NewRun]:
    """`node_perf.confirm`: a node whose first run fell outside the healthy band runs again
    before it is called marginal or degraded (`assess`)."""
    found = assess(nodes, runs, spec.reference_tgs)
    return [NewRun(confirm_label(r.node), _params(r.node, spec.overrides), [r.node],
                   f"{r.node} ran {r.delta:+.1%} vs the median: {band(r.delta)} until a "
                   "second run agrees", CONFIRM.id)
            for r in found.nodes if r.needs_confirm and r.delta is not None]


def plan(spec: NodePerfSpec, ctx: SweepContext[None]) -> Plan:
    nodes = list(ctx.nodes)
    new = baseline_runs(spec, nodes, ctx.runs)
    if new:
        return new
    firsts = [r for r in ctx.runs if CONFIRM_SUFFIX not in r.label]
    if any(not _finished(r) for r in firsts):
        return []
    confirm = confirm_runs(spec, nodes, ctx.runs)
    if confirm:
        return confirm
    if open_runs(ctx.runs):
        return []
    return finish(assess(nodes, ctx.runs, spec.reference_tgs))


def finish(found: Assessment) -> Finished:
    if found.median is None:
        return Finished(False, "node perf: no node completed a run", {"nodes": []})
    worst = sorted(found.nodes, key=lambda r: -SEVERITY[r.status])
    flagged = [r for r in worst if r.status in ("degraded", "unhealthy")]
    usable = found.usable
    verdict: dict[str, Any] = {
        "median": found.median, "reference": found.reference,
        "cluster_delta": found.cluster_delta,
        "nodes": [r.as_dict() for r in found.nodes],
        "healthy": str(hostlist.collect_hostlist(usable)) if usable else "",
        "excluded": [r.node for r in flagged],
    }
    slow = found.cluster_delta is not None and found.cluster_delta <= DEGRADED_BAND
    verdict["cluster_slow"] = slow
    parts = [f"median {found.median:,.0f} TGS/device"]
    if slow and found.cluster_delta is not None:
        parts.append(f"the cluster is slow as a whole ({found.cluster_delta:+.1%} vs the "
                     "reference)")
    parts.append(", ".join(f"{r.node} {r.status}" for r in flagged) if flagged
                 else f"all {len(found.nodes)} nodes usable")
    return Finished(True, "node perf: " + "; ".join(parts), verdict)
