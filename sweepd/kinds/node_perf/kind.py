"""Node perf sweep: a 1-node run per node, each node judged against the median."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.kinds.api import NodeFaults
from sweepd.kinds.node_perf import exports, report
from sweepd.kinds.node_perf import plan as node_perf_plan
from sweepd.kinds.node_perf.demo import DEMO
from sweepd.kinds.node_perf.spec import NodePerfSpec
from sweepd.kinds.registry import Budget, Kind, Report, no_facts
from sweepd.util.hostlists import count_hostlist


def most_runs(spec: Mapping[str, Any]) -> int:
    """A first run per node, and a confirming run for a doubtful one (1-node runs)."""
    return 2 * count_hostlist(str(spec.get("nodes", "")))


# A fault on a 1-node job is that node's verdict, not a reason to move the job elsewhere.
KIND = Kind(exports.NAME, NodePerfSpec, node_perf_plan.plan,
            Report(report.markdown, report.rows), no_facts, node_faults=NodeFaults.RECORD,
            budget=Budget(runs=most_runs, node_runs=most_runs), plot=report.plot, demo=DEMO)
