"""GPUs per node is the cluster's (`cluster.gpus_per_node`), not a fixed 8: the memory
estimate shards the weights over nodes x GPUs per node, so a 4-GPU node holds twice the
weights per GPU and the first probe is smaller."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.config import ConfigError, load_config
from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.parse import parse_spec


def _first_probe(gpus_per_node: int) -> tuple[int, str]:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi1"})
    ctx = SweepContext(runs=[], nodes=["chi1"], gpu_memory_gib=192, facts=PerfFacts(),
                       gpus_per_node=gpus_per_node)
    first = plan(spec, ctx)
    assert isinstance(first, list) and first
    return int(first[0].params.overrides["per_device_batch_size"]), first[0].reason


def test_fewer_gpus_per_node_hold_more_weights_each() -> None:
    eight, why8 = _first_probe(8)
    four, why4 = _first_probe(4)
    # llama2-70b bf16 on one node: 140 GB over 8 GPUs is 16.3 GiB each, over 4 32.6 GiB.
    assert "params 16.3 GB" in why8 and "params 32.6 GB" in why4
    assert four < eight


def test_the_key_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[cluster]\ngpus_per_node = 4\n")
    assert load_config(path).cluster.gpus_per_node == 4
    assert load_config(None).cluster.gpus_per_node == 8
    path.write_text("[cluster]\ngpus_per_node = 0\n")
    with pytest.raises(ConfigError, match=r"cluster\.gpus_per_node"):
        load_config(path)
