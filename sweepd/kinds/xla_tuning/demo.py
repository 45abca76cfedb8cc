"""`sweepd demo --kind xla-tuning`: an FSDP=8 tuning sweep of deepseek3-671b on the
simulated cluster's flag-effect landscapes, then the scenario's ground truth (the best
recipe of at most 3 flags per cell, `sim/tuning.py truth_line`) to check the verdict by."""

from __future__ import annotations

from pathlib import Path

from sweepd.config import Config
from sweepd.kinds.registry import Demo
from sweepd.sim.scenario import DEMO_NODES

SCENARIO = Path(__file__).with_name("demo.yaml")
# The scenario's config tags, the sparse path first: the primary. One override selects the
# sparse path here (the real one adds use_turbo_grouped_gemm and use_deepep_dispatch): with
# the evidence run's profiler and dump settings, submit.sh's job name must stay <= 243 bytes.
TAGS: dict[str, dict[str, str]] = {"sparse": {"sparse_matmul": "true"}, "dense": {}}


async def truth_line(config: Config) -> str:
    """What the simulator knew and the sweep had to find out: each cell's best recipe."""
    from sweepd.clusters.factory import default_scenario
    from sweepd.kinds.xla_tuning.sim.tuning import truth_line as tuning_truth
    from sweepd.sim.scenario import load_scenario

    tuning = load_scenario(config.cluster.sim.scenario or default_scenario()).section("tuning")
    if tuning is None:
        return "(the scenario has no tuning section: no ground truth)"
    return "simulator's " + tuning_truth(tuning)


DEMO = Demo(
    "sweepd demo --kind xla-tuning: XLA / NCCL flag tuning of deepseek3-671b, FSDP=8, on an "
    "embedded simulated 8-node cluster\n(waves of flag profiles against baseline-deployed; "
    "cluster time runs 1000x faster)\n",
    SCENARIO,
    [{"kind": "xla-tuning", "name": "demo: deepseek3-671b FSDP=8 flag tuning",
      "model": "deepseek3-671b", "nodes": DEMO_NODES, "parallelism": "FSDP=8",
      "per_device_batch_size": 7, "config_tags": TAGS}],
    truth=truth_line)
