"""Models the toolkit's repo defines (configs/*.gpu.yml), beyond sweepd's built-in shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import search_space
from sweepd.kinds.model_perf.search import Outcome, Probe, next_probe
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.util.model_shapes import resolve_model, shape_from_config

LLAMA3_8B = """\
base_config: base.yml
model_name: llama3-8b
base_emb_dim: 4096
base_num_query_heads: 32
base_num_kv_heads: 8
base_mlp_dim: 14336
base_num_decoder_layers: 32
head_dim: 128
vocab_size: 128256
max_target_length: 8192
per_device_batch_size: 2
"""


def _config(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "configs" / f"{name}.gpu.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_config_with_shape_keys_gives_the_shape(tmp_path: Path) -> None:
    shape = shape_from_config(_config(tmp_path, "llama3-8b", LLAMA3_8B))
    assert shape is not None and shape.name == "llama3-8b"
    assert shape.params_b == pytest.approx(8.03, abs=0.05)   # Meta's figure: 8.03B
    assert (shape.layers, shape.d_model, shape.seq_len, shape.moe) == (32, 4096, 8192, False)


def test_a_config_naming_a_known_model_takes_its_shape(tmp_path: Path) -> None:
    text = "model_name: llama2-70b\nmax_target_length: 2048\ndcn_fsdp_parallelism: 2\n"
    shape = shape_from_config(_config(tmp_path, "llama2-70b-2n", text))
    assert shape is not None and shape.name == "llama2-70b-2n"
    assert (shape.params_b, shape.seq_len, shape.min_nodes) == \
        (resolve_model("llama2-70b").params_b, 2048, 2)


@pytest.mark.parametrize("text", ["model_name: something-new\n", "- a list\n", ": bad: yaml:\n",
                                  "base_emb_dim: many\nbase_num_decoder_layers: 2\n"])
def test_a_config_without_a_shape_gives_none(tmp_path: Path, text: str) -> None:
    assert shape_from_config(_config(tmp_path, "qwen3-14b", text)) is None


def test_a_model_without_a_shape_starts_small_and_lets_the_memory_line_do_the_rest() -> None:
    spec = ModelPerfSpec.model_construct(
        kind="model-perf", model="qwen3-14b", nodes="chi[1-2]", parameter="per_device_batch_size",
        values=None, lower=1, upper=None, gpu_memory_gib=None, mem_fraction=None, max_runs=12,
        overrides={}, env={})
    ctx = SweepContext(runs=[], nodes=["chi1", "chi2"], gpu_memory_gib=192, facts=PerfFacts())
    space, why = search_space(spec, ctx)
    first = next_probe(space, [])
    assert first is not None and first.value == 1 and "a small first probe" in first.why
    assert "no shape known for qwen3-14b" in why
    ran = Probe(1, Outcome.OK, 500.0, temp_gb=6.0, fixed_gb=30.0, limit_gb=178.5)
    second = next_probe(space, [ran])
    assert second is not None and second.value == 24   # (176.7 - 30) / 6
    assert "largest predicted to fit: compiled memory" in second.why
