"""The node perf sweep's spec: the pinned nodes, each judged against the median."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sweepd.kinds.spec import _Spec
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
