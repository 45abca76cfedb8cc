"""A campaign's stated most (`validate`) is the sum of the node-hour caps its stages' sweeps
stop at: each stage's figure is what core/cost_cap.applied_cap gives that stage's own spec,
a `max_node_hours` given in `batch_stage` or `flags_stage` included."""

from __future__ import annotations

from typing import Any

import pytest

from sweepd.config import Config
from sweepd.core.budgets import kind_node_hours
from sweepd.core.cost_cap import applied_cap
from sweepd.kinds.campaign.gather import CampaignFacts, Cell
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.stages import stage_spec, steps
from sweepd.kinds.model_perf.exports import Optimum
from sweepd.kinds.parse import parse_spec
from sweepd.util.hostlists import expand_nodes

SLOT = "n[1-9]"
RETRIES = Config().policy.max_retries


def _raw(**extra: Any) -> dict[str, Any]:
    return {"kind": "campaign", "model": "deepseek3-671b", "parallelism": "FSDP=8",
            "nodes": SLOT, "budget_hours": 12, "batch_stage": {"max_runs": 10}, **extra}


def _stated(raw: dict[str, Any]) -> dict[str, float]:
    """Each stage's cap as `validate` states it (the campaign kind's node-hour budget)."""
    most = kind_node_hours("campaign", raw, RETRIES)
    assert most is not None
    caps = most[1].split(": ", 1)[1].split(", ")
    return {k: float(v) for k, v in (c.rsplit(" ", 1) for c in caps)}


def _applied(raw: dict[str, Any]) -> dict[str, float]:
    """Each stage's cap as its own sweep would apply it, on the campaign's nodes."""
    spec = parse_spec(raw)
    assert isinstance(spec, CampaignSpec)
    facts = CampaignFacts(cells={"FSDP=8": Cell(batch=Optimum(3, 9, 1190.0))})
    slot = expand_nodes(SLOT)
    out = {}
    for step in steps(spec):
        nodes = slot if step.par is None else slot[:spec.nodes_of(step.par)]
        child = parse_spec(stage_spec(spec, step, facts, nodes))
        out[step.key] = applied_cap(child, Config()).hours
    return out


@pytest.mark.parametrize("extra", [
    {},
    {"batch_stage": {"max_runs": 10, "max_node_hours": 3}},
    {"flags_stage": {"max_node_hours": 500}},
    {"batch_stage": {"max_node_hours": 100}, "flags_stage": {"max_node_hours": 20}},
])
def test_each_stage_is_stated_at_the_cap_its_sweep_applies(extra: dict[str, Any]) -> None:
    raw = _raw(**extra)
    assert _stated(raw) == _applied(raw)


def test_a_stages_own_max_node_hours_is_its_cap() -> None:
    stated = _stated(_raw(batch_stage={"max_runs": 10, "max_node_hours": 3},
                          flags_stage={"max_node_hours": 20}))
    assert stated["batch"] == 3 and stated["flags"] == 20
    # Beside them, the defaults: the 8 h timebox x the stage's nodes.
    assert stated["health"] == 8 * 9 and stated["confirm"] == 8 * 8
