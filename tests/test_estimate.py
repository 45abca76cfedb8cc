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
