"""What this sweep's search runs over and where it starts: the spec's given values, an
earlier sweep of the same cell, a small first probe for a shape sweepd does not know, or the
memory estimate's largest batch."""

from __future__ import annotations

from dataclasses import replace

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.estimate import memory_estimate, sharding_of, weight_bytes
from sweepd.kinds.model_perf.facts import PerfFacts, Prior
from sweepd.kinds.model_perf.jobfacts import measures_noise, noise_track
from sweepd.kinds.model_perf.pool import pool_of
from sweepd.kinds.model_perf.search import SearchSpace, batch_space
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec
from sweepd.kinds.model_perf.thresholds import THRESHOLDS


def search_space(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> tuple[SearchSpace, str]:
    space, why = _space(spec, ctx)
    # The spec's `multi_peak`: a departure from SKILL.md's single-peak narrowing, so off
    # by default (search/shapes.py's ladder). The noise: what the runs' steps show; with
    # `measure_noise` (off by default, one run more) also what two runs of the best show.
    # The device's memory known: the compiled-memory line is evidence, not proof of what
    # cannot fit (search/memory.py `line_evidence`).
    device = pool_of(spec, ctx).gb
    track = noise_track(ctx, spec.noise_floor, measures_noise(spec.measured_noise, ctx))
    return replace(space, multi_peak=spec.multi_peak, noise=track.decided, track=track,
                   measure_noise=spec.measure_noise,
                   check_slowdown=spec.check_slowdown, device_gb=device), why


def _space(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> tuple[SearchSpace, str]:
    if spec.values is not None:
        ordered = all(isinstance(v, int | float) for v in spec.values)
        values = tuple(sorted(spec.values) if ordered else spec.values)
        # Given batch sizes are still the work per step (search.SearchSpace.work_grows).
        return SearchSpace(values, None, ordered, work_grows=spec.parameter == BATCH), \
            f"{len(values)} given values"
    prior = ctx.facts.prior
    if prior:
        return _from_prior(spec, prior)
    model = spec.known_shape
    if model is None:
        return _small_start(spec)
    pool = pool_of(spec, ctx)
    if pool.gb is None:
        # No pool, no estimate: a 16 GB chip planned on the 192 GB default ran 472 first.
        return _small_start(spec, f"{pool.line}, so no memory estimate")
    # The Memstats were printed by a job on the pinned nodes; param memory per GPU changes
    # with the node count (sharding), so they hold only while all of them are in use.
    same = len(ctx.nodes) == len(spec.node_list)
    settings = spec.overrides
    axes = any(k.endswith("_parallelism") for k in settings)
    sharding = sharding_of(settings, len(ctx.nodes), model.gpus_per_node, model.moe) \
        if axes or "expert_shard_attention_option" in settings else None
    est = memory_estimate(
        replace(model, gpus_per_node=ctx.gpus_per_node), len(ctx.nodes),
        pool.gb,
        spec.mem_fraction or _env_fraction(spec) or THRESHOLDS.mem_fraction,
        seq_len=_int(settings.get("max_target_length")),
        weight_bytes=weight_bytes(settings),
        prior_param_gb=ctx.facts.param_gb if same else None, sharding=sharding,
    )
    space = batch_space(est.max_batch, spec.lower, spec.upper,
                        source=f"the memory estimate (SKILL.md formula, {est.source})")
    source = est.source if est.source == "estimate" else \
        f"memstats of an earlier job on these {len(ctx.nodes)} nodes"
    if est.source == "estimate" and (sharding is not None or "weight_dtype" in settings):
        source += (f" ({weight_bytes(settings)} bytes/param"
                   + (f", sharding {sharding.why}" if sharding else "") + ")")
    why = (f"memory {source}: pool {est.pool_gb:.1f} GB - params {est.param_gb:.1f} GB = "
           f"{est.available_gb:.1f} GB / {est.per_batch_gb:.2f} GB per batch"
           f" -> max ~{est.max_batch}"
           + (f" (shape from configs/{spec.model}.gpu.yml)" if spec.toolkit_shape else ""))
    return space, why


def _small_start(spec: ModelPerfSpec, why: str | None = None) -> tuple[SearchSpace, str]:
    """A model whose shape sweepd does not know, or a pool it does not know: no estimate is
    possible, so the first probe is small (likely to fit) and its compiled-memory line
    predicts the largest fit."""
    space = batch_space(spec.lower, spec.lower, spec.upper, source="no estimate")
    why = why or f"no shape known for {spec.model}, so no memory estimate"
    return replace(space, start=spec.lower, start_why=f"a small first probe ({why}); its "
                   "compiled-memory line predicts the largest batch that fits"), why


def _from_prior(spec: ModelPerfSpec, prior: Prior) -> tuple[SearchSpace, str]:
    """An earlier sweep of the same cell measured the peak and the largest fit: start at its
    peak, take its max fit as the estimate, and its OOM (deterministic, SKILL.md: never
    retried) as the top of the search."""
    sweep, peak, max_fit, oom = prior.sweep, prior.peak, prior.max_fit, prior.oom
    upper = spec.upper if oom is None else min(spec.upper or int(oom) - 1, int(oom) - 1)
    upper = max(spec.lower, upper) if upper is not None else None
    space = batch_space(int(max_fit), spec.lower, upper, source=f"sweep #{sweep}'s max fit")
    tgs = f" at {prior.tgs:,.0f} TGS/device" if prior.tgs else ""
    start = peak if peak in space.candidates else None
    why = (f"sweep #{sweep} of the same model, node count and config: peak "
           f"{spec.parameter}={peak}{tgs}, largest that fitted {max_fit}"
           + (f", OOM at {oom}" if oom is not None else ""))
    return replace(space, start=start, start_why=f"at the peak of {why}",
                   prior=prior.probes), why


def _env_fraction(spec: ModelPerfSpec) -> float | None:
    """The config's memory fraction: its env, or the first value of a swept fraction
    (the search starts at that setting)."""
    second = spec.second
    if second is not None and second.parameter.endswith("XLA_PYTHON_CLIENT_MEM_FRACTION"):
        return float(second.values[0])
    raw = spec.env.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def _int(v: object) -> int | None:
    try:
        return int(str(v)) if v is not None else None
    except ValueError:
        return None
