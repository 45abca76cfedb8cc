"""What other kinds may read of the network kind's results (a campaign's node health):
typed calls, so that no other kind reads its sweeps by the kind's name and verdict keys
(the layering test allows another kind this module alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweepd.store.states import SweepState

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep

NAME = "network"   # the kind's name (kind.py registers it)


@dataclass(frozen=True)
class NetworkVerdict:
    """A finished network sweep: the nodes to keep out of a job, each with its diagnosis
    (a bad node, one end of a bad link, a suspect it could not clear)."""

    sweep: int
    excluded: Mapping[str, str] = field(default_factory=dict)
    recommendation: str = ""


def network_verdict(sweep: Sweep) -> NetworkVerdict | None:
    """The sweep's verdict (None: not a finished network sweep)."""
    verdict = sweep.verdict or {}
    if sweep.kind != NAME or sweep.state != SweepState.DONE:
        return None
    out: dict[str, str] = {}
    for fault in verdict.get("faults", []):
        nodes = list(fault.get("nodes", []))
        if fault.get("kind") == "node":
            out[nodes[0]] = str(fault.get("diagnosis"))
        elif fault.get("kind") == "link":
            out[nodes[-1]] = str(fault.get("diagnosis"))
        else:
            out.update({n: str(fault.get("diagnosis")) for n in nodes})
    return NetworkVerdict(sweep.id, out, str(verdict.get("recommendation", "")))
