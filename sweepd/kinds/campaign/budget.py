"""The most a campaign may take, said before it starts (`sweepd validate`). It submits its
stages as sweeps of their own kinds, each stopped at its own node-hour cap
(core/cost_cap.applied_cap: the 8 h timebox x its nodes, or its stated most where larger):
the campaign's most is the sum of those caps. Its runs have no fixed most (a stage's
sweep plans them as its runs come in; the network check's group testing runs until its
faults are isolated)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.stages import steps
from sweepd.kinds.spec import TIMEBOX_HOURS
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
        cap = TIMEBOX_HOURS * nodes
        if step.stage == "flags":
            box = {"node_count": nodes, "thresholds": {
                "max_queue_hours": round(max(hours[step.key], 0.1), 2),
                **spec.flags_stage.get("thresholds", {})}, **spec.flags_stage}
            own = xla.most_node_hours(box, retries)
            cap = max(cap, own[0]) if own else cap
        caps.append((step.key, cap))
    total = round(sum(c for _, c in caps), 2)
    return total, ("the sum of its stages' node-hour caps: "
                   + ", ".join(f"{k} {c:g}" for k, c in caps))
