"""Node perf sweep: a 1-node run per node, each node judged against the median."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from sweepd.kinds.node_perf import plan as node_perf_plan
from sweepd.kinds.node_perf import report
from sweepd.kinds.node_perf.demo import DEMO
from sweepd.kinds.registry import Kind
from sweepd.kinds.spec import _Spec
from sweepd.util.hostlists import count_hostlist
from sweepd.util.model_shapes import resolve_model

MIN_FOR_MEDIAN = 3


class NodePerfSpec(_Spec):
    """One 1-node job per pinned node, all at once; outliers confirmed by a second run."""

    kind: Literal["node-perf"]
    reference_tgs: float | None = Field(
        default=None, gt=0, description="expected 1-node TGS/device: catches a cluster that "
        "is slow as a whole, which the median cannot")

    @model_validator(mode="after")
    def _one_node(self) -> NodePerfSpec:
        if resolve_model(self.model).min_nodes > 1:
            raise ValueError(f"{self.model} needs {resolve_model(self.model).min_nodes} nodes; "
                             "node perf runs 1-node jobs")
        if len(self.node_list) < MIN_FOR_MEDIAN and self.reference_tgs is None:
            # With two nodes the median sits halfway: a node 8% slow reads as 4% (marginal).
            raise ValueError(f"the median of {len(self.node_list)} node(s) cannot single out a "
                             f"slow one: pin at least {MIN_FOR_MEDIAN} nodes, or give "
                             "reference_tgs")
        return self

    @property
    def needed_nodes(self) -> int:
        return 1

    def default_name(self) -> str:
        return f"node perf {self.nodes}"


def most_runs(spec: Mapping[str, Any]) -> int:
    """A first run per node, and a confirming run for a doubtful one (1-node runs)."""
    return 2 * count_hostlist(str(spec.get("nodes", "")))


# A fault on a 1-node job is that node's verdict, not a reason to move the job elsewhere.
KIND = Kind("node-perf", NodePerfSpec, node_perf_plan.plan, report.markdown, report.rows,
            exclude_on_fault=False, plot=report.plot, demo=DEMO, most_runs=most_runs,
            most_node_runs=most_runs)
