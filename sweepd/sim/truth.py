"""Ground truth of the simulated cluster: does a config fit, and how fast does it run.

Pure functions of the scenario and the job's config. When the scenario gives no
`models.<name>` entry, the truth is derived from the model shape with a memory model that
deliberately differs from batch-sweep.SKILL.md's estimate (another constant, an attention
term, a share for gradients and optimizer state), so strategies built on that estimate are
off by a realistic margin, as they are on real hardware.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sweepd.sim import replay
from sweepd.sim.scenario import FaultKind, MeasuredCurve, Scenario
from sweepd.util.model_shapes import ModelShape, resolve_model

DEFAULT_MEM_FRACTION = 0.93
RUNTIME_OVERHEAD_GB = 1.5
# Of that overhead, the compiled program's outputs; the rest (RCCL buffers, the runtime) is
# outside the program, so the compiled-memory line does not show it: its total can sit a
# little under the pool and still OOM, as on real hardware.
OUTPUT_GB = 0.4
# Gradients and optimizer shards beyond the bf16 params, as a fraction of param memory.
TRAINING_STATE_SHARE = 0.5
ACT_BYTES_PER_TOKEN_LAYER_DIM = 8.0
ATTN_BYTES_PER_TOKEN2_LAYER = 0.5
MOE_ACTIVATION_FACTOR = 1.05      # expert dispatch buffers
TARGET_MFU = {False: 0.45, True: 0.24}     # keyed by ModelShape.moe
NODE_SCALING = 0.97                         # TGS/device kept per doubling of nodes
# remat_policy -> (activation memory factor, TGS factor); the default config is minimal_flash.
REMAT = {
    "minimal_flash": (1.0, 1.0), "full": (0.3, 0.78), "minimal": (1.25, 1.03),
    "save_qkv_proj": (1.15, 1.02), "save_dot_except_mlp": (1.4, 1.05),
}


@dataclass(frozen=True)
class Truth:
    fits: bool
    tgs: float                 # steady TGS per device (0 when it does not fit)
    mfu: float                 # percent
    tflops: float              # TFLOP/s per device
    mem_used_gb: float         # Memstats after params initialized
    mem_limit_gb: float
    batch: int
    seq_len: int
    max_batch: int
    alloc_gib: float           # the failed allocation an OOM reports
    temp_gb: float = 0.0       # compiled memory: activations, linear in the batch
    argument_gb: float = 0.0   # compiled memory: params + gradients/optimizer shards
    factor: float = 1.0        # node speed x network x commit factor applied to the TGS
    fail: FaultKind | None = None   # a commit effect that breaks this model
    output_gb: float = OUTPUT_GB    # compiled memory: the program's outputs
    # A recorded curve replayed (`models.<m>.measured`): the timeline reads its noise,
    # warm-up, fixed cost and log format from it. None: the formula's truth.
    replay: MeasuredCurve | None = None
    # The compiled-memory line a replayed run prints (its recorded total; None: none, as
    # an OOM at compile prints none on the chip).
    line_total_gb: float | None = None

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len


@dataclass(frozen=True)
class _Config:
    shape: ModelShape
    nodes: int
    batch: int | None
    seq: int
    remat: str
    mem_fraction: float


def flops_per_token(shape: ModelShape, seq: int) -> float:
    """Training FLOPs per token: 6 * active params plus the attention score term."""
    return 6 * shape.active_b * 1e9 + 12 * shape.layers * shape.d_model * seq


def _param_gb(shape: ModelShape, nodes: int) -> float:
    return shape.params_b * 1e9 * 2 / (shape.gpus_per_node * nodes) / 1e9


def _limit_gb(scenario: Scenario, mem_fraction: float) -> float:
    return scenario.cluster.gpu_memory_gib * mem_fraction


def _available_gb(scenario: Scenario, cfg: _Config) -> float:
    param = _param_gb(cfg.shape, cfg.nodes)
    used = param * (1 + TRAINING_STATE_SHARE) + RUNTIME_OVERHEAD_GB
    return _limit_gb(scenario, cfg.mem_fraction) - used


def _derived_act_gb(shape: ModelShape, seq: int) -> float:
    linear = seq * shape.d_model * shape.layers * ACT_BYTES_PER_TOKEN_LAYER_DIM
    attention = seq * seq * shape.layers * ATTN_BYTES_PER_TOKEN2_LAYER
    return (linear + attention) * (MOE_ACTIVATION_FACTOR if shape.moe else 1.0) / 1e9


def _attention_share(shape: ModelShape, seq: int) -> float:
    linear = seq * shape.d_model * ACT_BYTES_PER_TOKEN_LAYER_DIM
    attention = seq * seq * ATTN_BYTES_PER_TOKEN2_LAYER
    return attention / (linear + attention)


def _efficiency(nodes: int) -> float:
    return float(NODE_SCALING ** math.log2(nodes))


def _default_config(scenario: Scenario, shape: ModelShape) -> _Config:
    spec = scenario.model_truth(shape.name)
    nodes = spec.nodes if spec and spec.nodes else shape.min_nodes
    return _Config(shape, nodes, None, shape.seq_len, "minimal_flash", DEFAULT_MEM_FRACTION)


def _reference(scenario: Scenario, shape: ModelShape) -> tuple[float, float, float, int]:
    """(activation GB per sample, peak tokens per step, peak TGS, nodes) at the default config."""
    ref = _default_config(scenario, shape)
    spec = scenario.model_truth(shape.name)
    if spec is not None:
        # Half a sample of slack makes max_batch fit and max_batch + 1 fail exactly.
        max_batch, peak_batch, peak_tgs = spec.formula
        act = _available_gb(scenario, ref) / (max_batch + 0.5)
        return act, peak_batch * ref.seq, peak_tgs, ref.nodes
    act = _derived_act_gb(shape, ref.seq)
    max_batch = max(1, math.floor(_available_gb(scenario, ref) / act))
    peak_batch = max(1, round(max_batch * (0.7 if shape.moe else 0.85)))
    peak = (TARGET_MFU[shape.moe] * scenario.cluster.peak_tflops * 1e12
            / flops_per_token(shape, ref.seq) * _efficiency(ref.nodes))
    return act, peak_batch * ref.seq, peak, ref.nodes


def _act_gb(scenario: Scenario, cfg: _Config) -> float:
    act_ref, _, _, _ = _reference(scenario, cfg.shape)
    s = cfg.seq / cfg.shape.seq_len
    a = _attention_share(cfg.shape, cfg.shape.seq_len)
    # XLA inflates allocations to fill a larger pool: extra fraction buys less than it seems.
    inflation = 1 + 2 * max(0.0, cfg.mem_fraction - DEFAULT_MEM_FRACTION)
    return act_ref * ((1 - a) * s + a * s * s) * _remat(scenario, cfg)[0] * inflation


def _remat(scenario: Scenario, cfg: _Config) -> tuple[float, float]:
    """(activation memory factor, TGS factor) of the config's remat policy: the scenario's
    for this model, else the built-in table."""
    spec = scenario.model_truth(cfg.shape.name)
    given = spec.remat.get(cfg.remat) if spec is not None else None
    return given if given is not None else REMAT.get(cfg.remat, (1.0, 1.0))


def _max_batch(scenario: Scenario, cfg: _Config) -> int:
    return max(0, math.floor(_available_gb(scenario, cfg) / _act_gb(scenario, cfg)))


def _curve_tgs(scenario: Scenario, cfg: _Config, batch: int) -> float:
    """TGS of the config on perfect nodes: concave up to the peak, smooth decline after."""
    _, peak_tokens, peak_ref, ref_nodes = _reference(scenario, cfg.shape)
    peak_batch = peak_tokens / cfg.seq
    spec = scenario.model_truth(cfg.shape.name)
    moved = spec.remat_peak.get(cfg.remat) if spec is not None else None
    if spec is not None and moved is not None:  # its own curve: the default's, stretched
        peak_batch *= moved / spec.formula[1]
    peak = peak_ref * _efficiency(cfg.nodes) / _efficiency(ref_nodes)
    peak *= flops_per_token(cfg.shape, cfg.shape.seq_len) / flops_per_token(cfg.shape, cfg.seq)
    peak *= _remat(scenario, cfg)[1]
    if cfg.mem_fraction > 0.95:
        peak *= 0.97     # RCCL starved of memory
    if batch <= peak_batch:
        return float(peak * (batch / peak_batch) ** 0.6)
    x = (batch - peak_batch) / peak_batch
    return float(peak * max(0.05, 1 - 0.3 * x - 0.3 * x * x))


def _node_factor(scenario: Scenario, nodes: Sequence[str]) -> float:
    """A job runs at its slowest node; the network only matters across nodes."""
    factor = min(scenario.node(n).speed for n in nodes)
    if len(nodes) > 1:
        members = set(nodes)
        net = [scenario.node(n).nic_speed for n in nodes]
        net += [link.factor for link in scenario.links if {link.a, link.b} <= members]
        factor *= min(net)
    return factor


def _config(scenario: Scenario, shape: ModelShape, n_nodes: int,
            overrides: Mapping[str, str], env: Mapping[str, str]) -> _Config:
    try:
        batch = int(overrides["per_device_batch_size"]) if "per_device_batch_size" in overrides \
            else None
        seq = int(overrides.get("max_target_length", shape.seq_len))
        frac = float(env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", DEFAULT_MEM_FRACTION))
    except ValueError as exc:
        raise ValueError(f"bad override value: {exc}") from exc
    if (batch is not None and batch < 1) or seq < 1 or not 0 < frac <= 1:
        raise ValueError("per_device_batch_size and max_target_length must be >= 1, "
                         "XLA_PYTHON_CLIENT_MEM_FRACTION in (0, 1]")
    return _Config(shape, n_nodes, batch, seq, overrides.get("remat_policy", "minimal_flash"),
                   frac)


def _measured(scenario: Scenario, model: str) -> MeasuredCurve | None:
    spec = scenario.model_truth(resolve_model(model).name)
    return spec.measured if spec is not None else None


def default_batch(scenario: Scenario, model: str, n_nodes: int) -> int:
    """The batch the model config ships with: a safe 80% of the peak."""
    shape = resolve_model(model)
    if (curve := _measured(scenario, model)) is not None:
        return replay.default_batch(curve)
    cfg = _Config(shape, n_nodes, None, shape.seq_len, "minimal_flash", DEFAULT_MEM_FRACTION)
    _, peak_tokens, _, _ = _reference(scenario, shape)
    wanted = max(1, round(0.8 * peak_tokens / shape.seq_len))
    return max(1, min(wanted, _max_batch(scenario, cfg)))


def true_outcome(scenario: Scenario, model: str, nodes: Sequence[str],
                 overrides: Mapping[str, str], env: Mapping[str, str],
                 commit: str | None) -> Truth:
    shape = resolve_model(model)
    cfg = _config(scenario, shape, len(nodes), overrides, env)
    batch = cfg.batch if cfg.batch is not None else default_batch(scenario, model, len(nodes))
    if (curve := _measured(scenario, model)) is not None:
        return _replayed(scenario, curve, cfg, nodes, batch, commit)
    max_batch = _max_batch(scenario, cfg)
    fits = batch <= max_batch
    effect = scenario.commit_effect(commit, shape.name)
    factor = _node_factor(scenario, nodes) * effect.tgs_factor
    tgs = _curve_tgs(scenario, cfg, batch) * factor
    tgs = tgs if fits else 0.0
    tflops = tgs * flops_per_token(shape, cfg.seq) / 1e12
    param = _param_gb(shape, cfg.nodes)
    available = _available_gb(scenario, cfg)
    need = _act_gb(scenario, cfg) * batch
    alloc = max(0.25, need - available + 0.5 * _act_gb(scenario, cfg)) if not fits else 0.0
    return Truth(
        fits=fits, tgs=tgs, mfu=100 * tflops / scenario.cluster.peak_tflops, tflops=tflops,
        mem_used_gb=param + RUNTIME_OVERHEAD_GB,
        mem_limit_gb=_limit_gb(scenario, cfg.mem_fraction),
        batch=batch, seq_len=cfg.seq, max_batch=max_batch, alloc_gib=round(alloc, 2),
        temp_gb=need, argument_gb=param * (1 + TRAINING_STATE_SHARE),
        factor=factor, fail=effect.fail,
    )


def _replayed(scenario: Scenario, curve: MeasuredCurve, cfg: _Config, nodes: Sequence[str],
              batch: int, commit: str | None) -> Truth:
    """A recorded curve's run at `batch` (Unmeasured, a ValueError, for a batch it lacks).
    The line's total is what the chip printed, over the device memory or not: it is an
    estimate, and a batch passes or fails as it did on the chip."""
    replay.check_batch(curve, batch)
    effect = scenario.commit_effect(commit, cfg.shape.name)
    factor = _node_factor(scenario, nodes) * effect.tgs_factor
    fits = not replay.fails(curve, batch)
    tgs = curve.points[batch].tgs * factor if fits else 0.0
    tflops = tgs * flops_per_token(cfg.shape, cfg.seq) / 1e12
    total = replay.memory_total(curve, batch) if fits else None
    required, available = replay.oom_sizes(curve, batch)
    return Truth(
        fits=fits, tgs=tgs, mfu=100 * tflops / scenario.cluster.peak_tflops, tflops=tflops,
        mem_used_gb=curve.argument_gb, mem_limit_gb=curve.hbm_gib, batch=batch,
        seq_len=cfg.seq, max_batch=replay.max_batch(curve),
        alloc_gib=0.0 if fits else round(required - available, 2),
        temp_gb=max(0.0, (total or 0.0) - curve.argument_gb), argument_gb=curve.argument_gb,
        factor=factor, fail=effect.fail, output_gb=0.0, replay=curve, line_total_gb=total)


def true_max_batch(scenario: Scenario, model: str, nodes: Sequence[str],
                   overrides: Mapping[str, str] | None = None,
                   env: Mapping[str, str] | None = None) -> int:
    """The largest batch that fits (a replayed curve: the largest measured that passed)."""
    shape = resolve_model(model)
    if (curve := _measured(scenario, model)) is not None:
        return replay.max_batch(curve)
    return _max_batch(scenario, _config(scenario, shape, len(nodes), overrides or {}, env or {}))


def true_peak_batch(scenario: Scenario, model: str, nodes: Sequence[str],
                    overrides: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None) -> int:
    """The batch with the highest true TGS among those that fit (0 when none fits; a
    replayed curve: among its measured batches)."""
    shape = resolve_model(model)
    if (curve := _measured(scenario, model)) is not None:
        return replay.peak_batch(curve)
    cfg = _config(scenario, shape, len(nodes), overrides or {}, env or {})
    fitting = range(1, _max_batch(scenario, cfg) + 1)
    return max(fitting, key=lambda b: _curve_tgs(scenario, cfg, b), default=0)
