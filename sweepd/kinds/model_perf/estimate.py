"""Memory budget and estimated max batch (batch-sweep.SKILL.md, Step 2 and Step 3.1).

Pure arithmetic. Units are GiB throughout: a Memstats line (`Using (GB) 41.2 / 178.5`) reports
the same unit as the pool (192 GiB x 0.93 = 178.56), so a recorded `used` figure can stand in
for the estimated parameter memory directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.util.model_shapes import ModelShape

GIB = 1024**3
# Activation bytes per sequence position, per unit of d_model, per layer (SKILL.md Step 3).
ACTIVATION_BYTES = 12


# weight_dtype -> bytes per parameter (SKILL.md Step 2: bf16=2, fp32=4).
WEIGHT_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "float32": 4, "fp32": 4,
                "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "int8": 1}
# The axes that shard weights: data (and sequence/context) parallelism replicate them.
WEIGHT_AXES = ("fsdp", "fsdp_transpose", "tensor", "tensor_sequence", "pipeline")


@dataclass(frozen=True)
class Sharding:
    """Into how many pieces the weights are cut on each GPU's behalf."""

    dense: int   # non-expert weights
    expert: int  # expert weights (MoE): the expert axis shards them as well
    why: str


def weight_bytes(settings: Mapping[str, object]) -> int:
    """`weight_dtype` from the run's settings (overrides over the config); bf16 when unset."""
    raw = str(settings.get("weight_dtype", "bfloat16")).strip().lower()
    if raw not in WEIGHT_BYTES:
        raise ValueError(f"weight_dtype {raw!r} is not one of {', '.join(WEIGHT_BYTES)}")
    return WEIGHT_BYTES[raw]


def _axis(settings: Mapping[str, object], key: str) -> int | None:
    raw = settings.get(key)
    if raw is None:
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise ValueError(f"{key} must be a whole number, not {raw!r}") from None


def _level(settings: Mapping[str, object], level: str, size: int) -> dict[str, int]:
    """One level's axes (`dcn` over nodes, `ici` over a node's GPUs); a -1 axis takes what
    the others leave. No axis at all: FSDP across the level (the toolkit's configs)."""
    given = {k.removeprefix(f"{level}_").removesuffix("_parallelism"): v
             for k in settings if k.startswith(f"{level}_") and k.endswith("_parallelism")
             and (v := _axis(settings, k)) is not None}
    if not given:
        return {"fsdp": size}
    fixed = math.prod(v for v in given.values() if v > 0)
    return {k: (max(1, size // fixed) if v == -1 else v) for k, v in given.items()}


def sharding_of(settings: Mapping[str, object], nodes: int, gpus_per_node: int,
                moe: bool) -> Sharding:
    """SKILL.md Step 2's total_sharding from the config's parallelism axes (DCN and ICI):
    the axes that shard weights multiply; for MoE the expert axis shards the experts, and
    the rest only with `expert_shard_attention_option: fsdp`."""
    axes = [_level(settings, "dcn", nodes), _level(settings, "ici", gpus_per_node)]
    dense = math.prod(a.get(k, 1) for a in axes for k in WEIGHT_AXES)
    expert = math.prod(a.get("expert", 1) for a in axes)
    shares = str(settings.get("expert_shard_attention_option", "")).strip().lower() == "fsdp"
    named = ", ".join(f"{lvl}_{k}={v}" for lvl, a in zip(("dcn", "ici"), axes, strict=True)
                      for k, v in a.items() if v != 1)
    if moe:
        why = (f"{named or 'no sharding'}: experts /{dense * expert}, the rest "
               f"/{dense * (expert if shares else 1)}")
        return Sharding(dense * (expert if shares else 1), dense * expert, why)
    return Sharding(dense, dense, f"{named or 'no sharding'}: /{dense}")


@dataclass(frozen=True)
class MemoryEstimate:
    pool_gb: float
    param_gb: float
    available_gb: float
    per_batch_gb: float
    max_batch: int
    source: Literal["estimate", "memstats"]


def memory_estimate(
    model: ModelShape,
    nodes: int,
    gpu_memory_gib: float,
    mem_fraction: float = THRESHOLDS.mem_fraction,
    seq_len: int | None = None,
    weight_bytes: int = 2,
    prior_param_gb: float | None = None,
    sharding: Sharding | None = None,
) -> MemoryEstimate:
    """The budget with its breakdown, so a report can show how the max batch was reached."""
    if nodes < 1 or gpu_memory_gib <= 0 or not 0 < mem_fraction <= 1:
        raise ValueError("nodes >= 1, gpu_memory_gib > 0 and 0 < mem_fraction <= 1 required")
    pool = gpu_memory_gib * mem_fraction
    source: Literal["estimate", "memstats"]
    if prior_param_gb is not None:
        # A prior run's `Memstats: After params initialized` is exact: prefer it.
        param, source = prior_param_gb, "memstats"
    elif sharding is None:
        # FSDP over every GPU: each holds 1/(nodes*gpus) of the weights.
        shards = nodes * model.gpus_per_node
        param, source = model.params_b * 1e9 * weight_bytes / shards / GIB, "estimate"
    else:
        # MoE: the weights outside the experts are about the active ones (attention, the
        # shared layers); the rest are experts, sharded by the expert axis too.
        experts = model.params_b - model.active_b if model.moe else 0.0
        rest = model.params_b - experts
        param = (rest / sharding.dense + experts / sharding.expert) * 1e9 * weight_bytes / GIB
        source = "estimate"
    available = pool - param
    tokens = seq_len if seq_len is not None else model.seq_len
    per_batch = tokens * model.d_model * model.layers * ACTIVATION_BYTES / GIB
    # At least 1: the sweep itself finds out whether batch 1 fits.
    max_batch = max(1, math.floor(available / per_batch))
    return MemoryEstimate(
        pool_gb=pool,
        param_gb=param,
        available_gb=available,
        per_batch_gb=per_batch,
        max_batch=max_batch,
        source=source,
    )
