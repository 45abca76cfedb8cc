"""Issue 22: the memory estimate that places a sweep's first probe reads the config's
weight_dtype and parallelism axes (before: 2 bytes per parameter and nodes x GPUs shards
always), seen through the planner, whose reason `explain` shows."""

from __future__ import annotations

import re
from typing import Any

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec


def _first(model: str, nodes: int, overrides: dict[str, Any]) -> tuple[int, float]:
    """The first probe's batch and the parameter memory its reason gives."""
    spec = parse_spec({"kind": "model-perf", "model": model, "nodes": f"chi[1-{nodes}]",
                       "overrides": overrides})
    assert isinstance(spec, ModelPerfSpec)
    new = plan(spec, SweepContext(runs=[], nodes=[f"chi{i}" for i in range(1, nodes + 1)],
                                  gpu_memory_gib=192, facts=PerfFacts(), jobs=[]))
    assert isinstance(new, list) and new
    params = re.search(r"params (\d+(?:\.\d+)?) GB", new[0].reason)
    assert params, new[0].reason
    return int(new[0].params.overrides["per_device_batch_size"]), float(params.group(1))


def test_fp32_weights_take_twice_the_parameter_memory() -> None:
    _, bf16 = _first("llama2-70b", 2, {})
    _, fp32 = _first("llama2-70b", 2, {"weight_dtype": "float32"})
    assert abs(fp32 - 2 * bf16) < 0.15, (bf16, fp32)   # both printed to 0.1 GB


def test_data_parallel_axes_shard_weights_less_and_start_lower() -> None:
    """dcn_data_parallelism=4 on 4 nodes replicates the weights across nodes: they are
    sharded over one node's 8 GPUs, not all 32, so 4x the parameter memory per GPU and a
    lower first probe."""
    batch, sharded = _first("mixtral-8x22b", 4, {})
    lower, replicated = _first("mixtral-8x22b", 4, {"dcn_data_parallelism": 4,
                                                    "ici_fsdp_parallelism": -1})
    assert replicated > 3 * sharded and lower < batch, (sharded, replicated, batch, lower)
