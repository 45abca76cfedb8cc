"""The default landscape: the real FSDP=8 and PP=8 figures of xla-tuning-facts.md.

DeepSeek3-671B, 8 nodes x 8 MI355 (288 GB HBM), pdbs=7, sparse (DeepEP) and dense
(capacity-factor) config tags. Factors are the measured deltas vs baseline-deployed; figures
the facts file does not give are marked ASSUMED (kept small, so they never decide the truth).
FSDP was tuned with an env file that set nothing; PP=8 was tuned later, with the env file
carrying FSDP's winner (all-gather combine 1 GiB), which costs PP 1.0 % (sparse) / 6.6 %
(dense): restore_default wins there, the sign flip the report's guard is for. PP=8's other
all-gather thresholds cost more the smaller they are (ASSUMED, see `_pp_thresholds`), so the
truth there removes the env file's flag (restore_default) rather than picking any other value.
"""

from __future__ import annotations

import math

from sweepd.kinds.xla_tuning.catalog.catalog import Cost
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, MIB, OVERLAP_LIMIT, RS
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Interaction, Landscape

DBUF = "xla_gpu_enable_while_loop_double_buffering=true"
PAG = "xla_gpu_enable_pipelined_all_gather=true"
PRS = "xla_gpu_enable_pipelined_reduce_scatter=true"
PAR = "xla_gpu_enable_pipelined_all_reduce=true"
HPAS = "xla_gpu_enable_highest_priority_async_stream=true"
PP2P = "xla_gpu_enable_pipelined_p2p=true"
CPD = "xla_gpu_collective_permute_decomposer_threshold"
NCH8 = "NCCL_NCHANNELS_PER_NET_PEER=8"
PROTO = "NCCL_PROTO=Simple"
BUF = f"NCCL_BUFFSIZE={16 * MIB}"
QPS8 = "NCCL_IB_QPS_PER_CONNECTION=8"
MEM95 = "XLA_PYTHON_CLIENT_MEM_FRACTION=.95"
TAGS = ("sparse", "dense")
# ag alone (1 GiB, 512 MiB, 2 GiB measured; others ASSUMED on the same curve); rs alone is
# derived so that ag+rs reproduces the measured "both" deltas.
_AG = {256: 1.105, 384: 1.113, 512: 1.1155, 768: 1.1158, 1024: 1.1160, 2048: 1.1067, 4096: 1.02}
_BOTH = {256: 1.10, 384: 1.1153, 512: 1.0998, 768: 1.085, 1024: 1.0585, 2048: 1.079,
         4096: 0.9561}


def _t(tgs: float, mem: float = 1.0) -> Effect:
    return Effect(tgs=tgs, mem=mem)


def _thresholds() -> dict[str, Effect]:
    out: dict[str, Effect] = {}
    for mib, g in _AG.items():
        out[f"{AG}={mib * MIB}"] = _t(g)
        out[f"{RS}={mib * MIB}"] = _t(_BOTH[mib] / g)
    return out


def fsdp8() -> Landscape:
    effects = {
        **_thresholds(),
        # No LHS effect: the image's XLA_FLAGS already set latency_hiding_scheduler=True and
        # XLA reads `true` as the same value, so the catalog's `lhs` is a no-op here (the
        # planner does not run it, `in_effect.py`); the facts' "LHS force +1.72 %" was one
        # run, within jitter.
        HPAS: _t(1.0032),
        NCH8: _t(1.0426),
        PROTO: _t(0.9866),
        BUF: _t(0.9802),
        DBUF: _t(0.9731),
        f"{OVERLAP_LIMIT}=2": _t(0.9586),
        f"{OVERLAP_LIMIT}=4": _t(0.955),  # ASSUMED between 2 and 8
        f"{OVERLAP_LIMIT}=8": _t(0.9481),
        PAG: _t(1.0, mem=1.45),  # OOM
        PAR: _t(1.0, mem=1.25),  # OOM
        PRS: _t(0.99),  # ASSUMED
        QPS8: _t(1.003),  # ASSUMED
        MEM95: _t(1.004),  # ASSUMED
    }
    dense = {f"{AG}={mib * MIB}": _t(1 + (g - 1) * 1.77) for mib, g in _AG.items()}
    return Landscape(
        parallelism="FSDP=8", tags=TAGS, base_tgs={"sparse": 1017.7, "dense": 1080.0},
        step_s_at_base=28.21, effects=effects, tag_effects={"dense": dense},
        interactions=(
            # nch8 + mem .95 stacked on ag 1 GiB: +11.61 %, i.e. no gain over ag alone.
            Interaction(members=(NCH8, AG), tgs=1 / 1.0426),
            Interaction(members=(DBUF, HPAS), tgs=0.9614 / (0.9731 * 1.0032)),
        ),
        noise=0.008, flake_rate=0.03,
        evidence={Cost.ALL_GATHER: 0.42, Cost.REDUCE_SCATTER: 0.18, Cost.COMPUTE: 0.35,
                  Cost.ALL_TO_ALL: 0.05},
    )


def _pp_thresholds(at_1g: float) -> dict[str, Effect]:
    """PP=8's all-gather thresholds, anchored on the one measured value (1 GiB vs the image's
    8 GiB: -1.0 % sparse, -6.6 % dense). ASSUMED: each halving of the threshold below 8 GiB
    costs the same factor (a third of 1 GiB's three halvings), i.e. more, smaller all-gathers
    cost more; the reduce-scatter thresholds are neutral (PP=8 has no FSDP axis, and the
    evidence run shows no reduce-scatter)."""
    return {f"{AG}={mib * MIB}": _t(at_1g ** (math.log2(8 * 1024 / mib) / 3)) for mib in _AG}


def pp8() -> Landscape:
    ovl2 = f"{OVERLAP_LIMIT}=2"
    effects = {
        **_pp_thresholds(955.3 / 965.2),
        ovl2: _t(1.0338),
        HPAS: _t(1.0176),
        PROTO: _t(1.0334),
        MEM95: _t(1.005),  # measured +1.42 % once: jitter; ASSUMED +0.5 %
        f"{CPD}={GIB}": _t(1.0),
        f"{CPD}={256 * MIB}": _t(0.995),  # ASSUMED
        PP2P: _t(0.9469),
        f"{OVERLAP_LIMIT}=4": _t(0.9647),
        f"{OVERLAP_LIMIT}=8": _t(0.95),  # ASSUMED
        NCH8: _t(0.9826),
        PAR: _t(1.0, mem=217.0 / 178.0),  # OOM, 217 GiB temp
        PAG: _t(1.0, mem=302.0 / 178.0),  # OOM, 302 GiB temp
        DBUF: _t(0.98),  # ASSUMED
        PRS: _t(0.99),  # ASSUMED
        BUF: _t(0.99),  # ASSUMED
        "num_pipeline_microbatches=16": _t(1.01),  # ASSUMED (Wave 5; no figure published)
        "num_pipeline_microbatches=32": _t(0.97, mem=1.1),  # ASSUMED
        "num_layers_per_pipeline_stage=2": _t(1.0, mem=1.6),  # ASSUMED: OOMs
    }
    dense = {**_pp_thresholds(1080.2 / 1156.9), ovl2: _t(1.133)}
    return Landscape(
        parallelism="PP=8", tags=TAGS, base_tgs={"sparse": 965.2, "dense": 1156.9},
        step_s_at_base=30.02 * 955.3 / 965.2, effects=effects, tag_effects={"dense": dense},
        interactions=(
            Interaction(members=(ovl2, HPAS), tgs=1.047 / (1.0338 * 1.0176), tag="sparse"),
            # Pairs with NCCL_PROTO=Simple do not add up (ASSUMED); the measured four-flag
            # stack (ovl2 + async priority + cpd 1 GiB + Simple) is +4.80 %.
            Interaction(members=(ovl2, PROTO), tgs=0.975),
            Interaction(members=(HPAS, PROTO), tgs=0.98),
            Interaction(members=(ovl2, HPAS, PROTO), tgs=1.048 / (1.047 * 1.0334 * 0.975 * 0.98),
                        tag="sparse"),
            # Dense: async priority on top of overlap 2 costs 2.7 % (sign set by the config).
            Interaction(members=(ovl2, HPAS), tgs=0.973 / 1.0176, tag="dense"),
        ),
        deployed=(f"{AG}={GIB}",),
        noise=0.008, flake_rate=0.03,
        evidence={Cost.COLLECTIVE_PERMUTE: 0.30, Cost.BUBBLE: 0.22, Cost.COMPUTE: 0.40,
                  Cost.ALL_GATHER: 0.08},
    )


def default_landscapes() -> tuple[Landscape, Landscape]:
    return fsdp8(), pp8()

