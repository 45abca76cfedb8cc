import pytest

from sweepd.kinds.model_perf.estimate import GIB, memory_estimate
from sweepd.util.model_shapes import MODELS

LLAMA = MODELS["llama2-70b"]


def test_llama2_70b_on_8_nodes_of_192_gib() -> None:
    est = memory_estimate(LLAMA, nodes=8, gpu_memory_gib=192)
    assert est.pool_gb == pytest.approx(178.56)
    # 70e9 params x 2 bytes over 64 GPUs
    assert est.param_gb == pytest.approx(70e9 * 2 / 64 / GIB)
    assert est.param_gb == pytest.approx(2.037, abs=1e-3)
    assert est.available_gb == pytest.approx(178.56 - est.param_gb)
    # 4096 x 8192 x 80 layers x 12 bytes = exactly 30 GiB per sequence
    assert est.per_batch_gb == pytest.approx(30.0)
    assert est.max_batch == 5
    assert est.source == "estimate"
    assert memory_estimate(LLAMA, 8, 192).max_batch == 5


def test_memstats_replaces_the_param_estimate() -> None:
    est = memory_estimate(LLAMA, nodes=1, gpu_memory_gib=192, prior_param_gb=41.2)
    assert est.source == "memstats"
    assert est.param_gb == 41.2
    assert est.available_gb == pytest.approx(137.36)
    assert est.max_batch == 4  # 137.36 / 30
    assert memory_estimate(LLAMA, nodes=1, gpu_memory_gib=192).max_batch == 5


def test_sequence_length_weight_bytes_and_fraction_move_the_estimate() -> None:
    assert memory_estimate(LLAMA, 8, 192, seq_len=2048).max_batch == 11  # 176.5 / 15
    wide = memory_estimate(LLAMA, 1, 192, weight_bytes=4)
    assert wide.param_gb == pytest.approx(70e9 * 4 / 8 / GIB)
    assert memory_estimate(LLAMA, 8, 192, mem_fraction=0.5).max_batch == 3  # (96 - 2.04) / 30


def test_at_least_one_even_when_nothing_fits() -> None:
    est = memory_estimate(MODELS["llama3.1-405b"], nodes=1, gpu_memory_gib=192)
    assert est.available_gb < est.per_batch_gb
    assert est.max_batch == 1


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        memory_estimate(LLAMA, nodes=0, gpu_memory_gib=192)
    with pytest.raises(ValueError):
        memory_estimate(LLAMA, nodes=1, gpu_memory_gib=192, mem_fraction=1.5)


def test_weight_dtype_and_the_configs_parallelism_axes_shape_param_memory() -> None:
    """Issue 22: the estimate took 2 bytes and nodes x GPUs always."""
    from sweepd.kinds.model_perf.estimate import memory_estimate, sharding_of, weight_bytes
    from sweepd.util.model_shapes import resolve_model

    dense = resolve_model("llama2-70b")
    base = memory_estimate(dense, 4, 192)
    fp32 = memory_estimate(dense, 4, 192, weight_bytes=weight_bytes({"weight_dtype": "float32"}))
    assert abs(fp32.param_gb - 2 * base.param_gb) < 1e-9
    # dcn_data=2, dcn_fsdp=2 on 4 nodes, ici_fsdp=-1: 16 shards, not 32.
    axes = {"dcn_data_parallelism": 2, "dcn_fsdp_parallelism": 2, "ici_fsdp_parallelism": -1}
    half = memory_estimate(dense, 4, 192, sharding=sharding_of(axes, 4, 8, moe=False))
    assert abs(half.param_gb - 2 * base.param_gb) < 1e-9
    # Tensor parallelism shards weights too; no axis at all is FSDP over every GPU.
    assert sharding_of({"ici_tensor_parallelism": 8}, 4, 8, moe=False).dense == 8 * 4
    assert sharding_of({}, 4, 8, moe=False).dense == 32
    # MoE: the expert axis shards the experts, and the rest only with
    # expert_shard_attention_option: fsdp.
    moe = {"dcn_fsdp_parallelism": 8, "ici_expert_parallelism": 8}
    plain = sharding_of(moe, 8, 8, moe=True)
    shared = sharding_of({**moe, "expert_shard_attention_option": "fsdp"}, 8, 8, moe=True)
    assert (plain.dense, plain.expert) == (8, 64) and (shared.dense, shared.expert) == (64, 64)
    ds = resolve_model("deepseek3-671b")
    assert memory_estimate(ds, 8, 192, sharding=shared).param_gb < \
        memory_estimate(ds, 8, 192, sharding=plain).param_gb


def test_a_bad_weight_dtype_or_axis_is_refused_with_one_line() -> None:
    import pytest

    from sweepd.kinds.parse import parse_spec
    from sweepd.kinds.spec import SpecError

    for bad in ({"weight_dtype": "float33"}, {"ici_fsdp_parallelism": "many"}):
        with pytest.raises((SpecError, ValueError)) as err:
            parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                        "overrides": bad})
        assert "weight_dtype" in str(err.value) or "ici_fsdp_parallelism" in str(err.value)
