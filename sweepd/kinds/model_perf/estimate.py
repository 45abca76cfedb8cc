"""Memory budget and estimated max batch (batch-sweep.SKILL.md, Step 2 and Step 3.1).

Pure arithmetic. Units are GiB throughout: a Memstats line (`Using (GB) 41.2 / 178.5`) reports
the same unit as the pool (192 GiB x 0.93 = 178.56), so a recorded `used` figure can stand in
for the estimated parameter memory directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sweepd.util.model_shapes import ModelShape

GIB = 1024**3
# Activation bytes per sequence position, per unit of d_model, per layer (SKILL.md Step 3).
ACTIVATION_BYTES = 12


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
    mem_fraction: float = 0.93,
    seq_len: int | None = None,
    weight_bytes: int = 2,
    prior_param_gb: float | None = None,
) -> MemoryEstimate:
    """The budget with its breakdown, so a report can show how the max batch was reached."""
    if nodes < 1 or gpu_memory_gib <= 0 or not 0 < mem_fraction <= 1:
        raise ValueError("nodes >= 1, gpu_memory_gib > 0 and 0 < mem_fraction <= 1 required")
    pool = gpu_memory_gib * mem_fraction
    source: Literal["estimate", "memstats"]
    if prior_param_gb is not None:
        # A prior run's `Memstats: After params initialized` is exact: prefer it.
        param, source = prior_param_gb, "memstats"
    else:
        # FSDP over every GPU: each holds 1/(nodes*gpus) of the weights.
        shards = nodes * model.gpus_per_node
        param, source = model.params_b * 1e9 * weight_bytes / shards / GIB, "estimate"
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
