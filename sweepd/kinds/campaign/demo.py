"""`sweepd demo --kind campaign`: node health, batch, XLA flags and confirm of
deepseek3-671b FSDP=8 on a 9-node simulated slot (a spare, one slow node), then the
simulator's true gain of what the campaign confirmed, to check its interval by."""

from __future__ import annotations

from pathlib import Path

from sweepd.config import Config
from sweepd.kinds.registry import Demo

SCENARIO = Path(__file__).with_name("demo.yaml")
NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881,2890]"


async def truth_line(config: Config) -> str:
    """The true gain of the confirmed candidate (its batch and flags) over baseline-deployed
    on the frozen nodes: the landscape's gain of the flags times the batch curve's ratio."""
    from sweepd.kinds.campaign.truth import true_gain_line

    return await true_gain_line(config)


DEMO = Demo(
    "sweepd demo --kind campaign: node health -> batch -> XLA flags -> confirm of "
    "deepseek3-671b FSDP=8\non an embedded simulated 9-node slot (one spare, one node 7% "
    "slow); cluster time runs 1000x faster\n",
    SCENARIO,
    [{"kind": "campaign", "name": "demo: deepseek3-671b FSDP=8 campaign",
      "model": "deepseek3-671b", "parallelism": "FSDP=8", "nodes": NODES,
      # The shipped example's 12 h: the stages take ~7.6 h of the simulated cluster's own
      # clock (~15-minute jobs), which the budget counts, however loaded the machine is.
      "budget_hours": 12, "overrides": {"sparse_matmul": "true"},
      "batch_stage": {"max_runs": 8}}],
    truth=truth_line)
