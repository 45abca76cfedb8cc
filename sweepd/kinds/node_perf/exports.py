"""What other kinds may read of node perf's results (the network kind cross-references its
node verdicts): typed calls, so that no other kind reads its sweeps by their kind's name and
verdict keys (the layering test allows another kind this module alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweepd.store.states import SweepState
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep
    from sweepd.store.store import Store

NAME = "node-perf"   # the kind's name (kind.py registers it)


@dataclass(frozen=True)
class NodeVerdicts:
    """A finished node perf sweep's median TGS and each node's band and delta against it."""

    sweep: int
    median: Any
    status: Mapping[str, Any]
    delta: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"sweep": self.sweep, "median": self.median, "status": dict(self.status),
                "delta": dict(self.delta)}


async def done_covering(store: Store, nodes: Sequence[str]) -> list[Sweep]:
    """The finished node perf sweeps whose nodes cover `nodes`, the latest first."""
    ours = set(nodes)
    return [s for s in reversed(await store.sweeps.all([SweepState.DONE]))
            if s.kind == NAME and ours <= set(expand_nodes(s.spec["nodes"]))]


def node_verdicts(sweep: Sweep) -> NodeVerdicts | None:
    """The sweep's node verdicts (None: not a node perf sweep, or no median)."""
    verdict = sweep.verdict or {}
    if sweep.kind != NAME or not verdict.get("median"):
        return None
    nodes = verdict.get("nodes", [])
    return NodeVerdicts(sweep.id, verdict["median"], {n["node"]: n["status"] for n in nodes},
                        {n["node"]: n["delta"] for n in nodes})
