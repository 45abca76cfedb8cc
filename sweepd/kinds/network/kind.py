"""Node network health sweep: group tests over subsets of the pinned nodes (spec.py,
plan.py: the planner, isolation.py: the group testing), judged against node perf's medians."""

from __future__ import annotations

from sweepd.kinds.api import NodeFaults
from sweepd.kinds.network import report
from sweepd.kinds.network.demo import DEMO
from sweepd.kinds.network.plan import gather, plan
from sweepd.kinds.network.spec import NetworkSpec
from sweepd.kinds.registry import Budget, Kind, Report

KIND = Kind("network", NetworkSpec, plan, Report(report.markdown, report.rows), gather,
            node_faults=NodeFaults.RECORD, plot=report.plot, demo=DEMO,
            # Group testing splits the nodes until its faults are isolated.
            budget=Budget(unbounded="its group testing runs until the faults are isolated"))
