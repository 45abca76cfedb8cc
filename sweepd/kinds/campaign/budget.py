"""The most a campaign may take, said before it starts (`sweepd validate`). It submits its
stages as sweeps of their own kinds, each stopped at its own node-hour cap (the one rule,
kinds/spec.node_hour_cap, that core/cost_cap.applied_cap applies: the stage's own
`max_node_hours` where `batch_stage` or `flags_stage` gives one, else the 8 h timebox x its
nodes, or its stated most where larger): the campaign's most is the sum of those caps. Its
runs have no fixed most (a stage's sweep plans them as its runs come in; the network
check's group testing runs until its faults are isolated)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.stages import steps
from sweepd.kinds.spec import node_hour_cap
from sweepd.kinds.xla_tuning import exports as xla

UNBOUNDED = ("each stage's sweep plans its runs as they come in; each stops at its own "
             "node-hour cap")


def node_hours(raw: Mapping[str, Any], retries: int) -> tuple[float, str] | None:
    try:
        spec = CampaignSpec.model_validate(dict(raw))
    except ValueError:
        return None
    slot = len(spec.node_list)
    hours = spec.stage_hours()
    caps: list[tuple[str, float]] = []
    for step in steps(spec):
        nodes = slot if step.par is None else spec.nodes_of(step.par)
        extra = {"batch": spec.batch_stage, "flags": spec.flags_stage}.get(step.stage, {})
        own = _own_cap(extra)
        most = None
        if step.stage == "flags" and own is None:
            box = {"node_count": nodes, "thresholds": {
                "max_queue_hours": round(max(hours[step.key], 0.1), 2),
                **spec.flags_stage.get("thresholds", {})}, **spec.flags_stage}
            stated = xla.most_node_hours(box, retries)
            most = stated[0] if stated is not None else None
        caps.append((step.key, node_hour_cap(own, nodes, most)[0]))
    total = round(sum(c for _, c in caps), 2)
    return total, ("the sum of its stages' node-hour caps: "
                   + ", ".join(f"{k} {c:g}" for k, c in caps))


def _own_cap(extra: Mapping[str, Any]) -> float | None:
    """A stage's `max_node_hours` from its extra fields; one its sweep's spec would refuse
    (not a number above 0) counts as none here: that stage's start says why."""
    own = extra.get("max_node_hours")
    if isinstance(own, bool) or not isinstance(own, int | float) or not own > 0:
        return None
    return float(own)
