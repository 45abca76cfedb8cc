"""`sweepd demo --kind xla-tuning`: an FSDP=8 tuning sweep of deepseek3-671b on the
simulated cluster (the flag-effect trainer and its ground-truth line come with the
simulator's part of issue 14)."""

from __future__ import annotations

from pathlib import Path

from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES

DEMO = Demo(
    "sweepd demo --kind xla-tuning: XLA / NCCL flag tuning of deepseek3-671b, FSDP=8, on an "
    "embedded simulated 8-node cluster (waves of profiles against baseline-deployed)\n",
    Path(__file__).with_name("demo.yaml"),
    [{"kind": "xla-tuning", "name": "demo: deepseek3-671b FSDP=8 flag tuning",
      "model": "deepseek3-671b", "nodes": DEMO_NODES, "parallelism": "FSDP=8",
      "per_device_batch_size": 7}])
