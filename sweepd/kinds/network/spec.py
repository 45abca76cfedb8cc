"""The network sweep's spec: the pinned nodes' group tests, judged against an expected TGS,
and the failure-only mode (steps short of the steady window)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sweepd.kinds.network.judge import SCALING, TOLERANCE
from sweepd.kinds.spec import _Spec
from sweepd.monitor.steady import steady_window


class NetworkSpec(_Spec):
    """Group tests judged against an expected TGS (given, from a node perf sweep, or the
    whole-group baseline). `steps` (default 15) reaches the steady window (steps 5-14);
    fewer (the SKILL.md's `-- steps=1`, the cheapest) is the failure-only mode: a group
    that trains at all is healthy, so a link or NIC that is only slow goes unseen."""

    kind: Literal["network"]
    expected_tgs: float | None = Field(
        default=None, gt=0, description="expected TGS/device of one node; a group of k nodes "
        "expects this x scaling^log2(k)")
    node_perf_sweep: int | None = Field(
        default=None, ge=1, description="node perf sweep to take the expected TGS and node "
        "verdicts from; default: the latest finished one covering these nodes")
    tolerance: float = Field(default=TOLERANCE, gt=0, lt=0.5,
                             description="a group this far below expected is degraded")
    scaling: float = Field(default=SCALING, gt=0.5, le=1.0,
                           description="TGS/device kept per doubling of nodes")

    @model_validator(mode="after")
    def _enough(self) -> NetworkSpec:
        if len(self.node_list) < 2:
            raise ValueError("a network sweep needs at least 2 nodes")
        return self

    @model_validator(mode="after")
    def _reaches_steady(self) -> NetworkSpec:
        # Replaces the base check: steps short of the steady window are the failure-only
        # mode here, not a spec that can never be judged.
        return self

    @property
    def failure_only(self) -> bool:
        return self.steps <= steady_window(self.profiler).start

    @property
    def needed_nodes(self) -> int:
        return 2

    def default_name(self) -> str:
        return f"network health {self.nodes}" + (" (failure-only)" if self.failure_only
                                                 else "")


# Said wherever a failure-only sweep's result is: what it cannot see.
FAILURE_ONLY_NOTE = (
    "failure-only (steps={steps}): a group that trains at all passes; a slow link or NIC "
    "is only seen with the steady window (steps >= {need}, the default 15)")


def failure_only_note(spec: NetworkSpec) -> str:
    return FAILURE_ONLY_NOTE.format(steps=spec.steps,
                                    need=steady_window(spec.profiler).start + 1)
