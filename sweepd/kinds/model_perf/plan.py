"""Model perf sweep planning: from the runs so far to the next probe or the optimum."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sweepd.kinds.api import Finished, NewRun, Plan, Stop, SweepContext, open_runs
from sweepd.kinds.model_perf.estimate import memory_estimate, sharding_of, weight_bytes
from sweepd.kinds.model_perf.facts import PerfFacts, Prior
from sweepd.kinds.model_perf.params import run_params, swept_value
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    Value,
    batch_space,
    best,
    flat_top,
    next_probe,
    open_beside_best,
    why_not_run,
)
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec
from sweepd.monitor.facts import FailureClass
from sweepd.store.rows import Job, Run

_OUTCOME = {"pass": Outcome.OK, "oom": Outcome.OOM}
# Failures of a node, of the infrastructure or a person's cancel say nothing about the
# value: such a run must not become the search's upper bound (the value is tried again, on
# the nodes left). docs/architecture.md "Failure classes" has the whole table.
NOT_ABOUT_THE_VALUE = frozenset({
    FailureClass.GPU_HARDWARE, FailureClass.ECC, FailureClass.NODE_CRASH, FailureClass.NIC,
    FailureClass.NO_GPU, FailureClass.PULL, FailureClass.CHECKOUT_OUTAGE,
    FailureClass.CONTROLLER_DOWN, FailureClass.CANCELLED, FailureClass.LOG_LOST,
})


def _finished(ctx: SweepContext[PerfFacts]) -> list[Run]:
    return [r for r in ctx.runs if r.state in ("passed", "failed")]


BUDGET_STOP = "model_perf.budget_gap"
EXTRA_RUNS = 4  # runs taken past max_runs (once a person agrees, or extend_budget) to close
# the gaps beside the best


def _counted(ctx: SweepContext[PerfFacts]) -> list[Run]:
    return [r for r in _finished(ctx) if _comparable(r, len(ctx.nodes))
            and (r.outcome == "pass" or r.failure_class not in NOT_ABOUT_THE_VALUE)]


def probes(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> list[Probe]:
    latest = _latest_jobs(ctx.jobs)
    runs = _counted(ctx)
    spoiled = _below_a_pass(spec, runs, latest)
    return [_probe(spec, r, latest.get(r.id), len(ctx.nodes)) for r in runs
            if r.id not in spoiled]


def _below_a_pass(spec: ModelPerfSpec, runs: Sequence[Run],
                  latest: dict[int, Job]) -> dict[int, str]:
    """Failed runs of a batch size below one that passed on these nodes, that name no
    allocation size (a silent OOM, a one-off compile hang counted as one): memory grows
    with the batch, so such a failure contradicts the pass and must not cap the search;
    the value is run again, once, on these nodes (run id -> why). Failing twice, or an
    OOM that names its allocation, it stands: the search takes it as bounding nothing
    below the pass, and never runs it again."""
    if spec.parameter != BATCH:
        return {}
    batch = {r.id: int(swept_value(BATCH, r.params) or 0) for r in runs}
    passed = [batch[r.id] for r in runs if r.outcome == "pass"]
    top = max(passed, default=None)
    failed = [r for r in runs if r.outcome != "pass"]
    times = Counter(batch[r.id] for r in runs)
    ok = set(passed)
    # Spoiled while its re-run is pending, or once the re-run passed (a one-off).
    return {r.id: (f"{spec.parameter}={batch[r.id]} failed ({r.failure_class or r.outcome}) "
                   f"without an allocation size below {top}, which passed on these nodes: "
                   "memory grows with the batch, so the failure contradicts the pass; "
                   "re-run once on the same nodes (an OOM that names its allocation "
                   "is never re-run)")
            for r in failed
            if top is not None and batch[r.id] < top and _alloc(r, latest.get(r.id)) is None
            and (times[batch[r.id]] < 2 or batch[r.id] in ok)}


def _alloc(run: Run, job: Job | None) -> float | None:
    return _gb(job.failure_detail) if run.outcome == "oom" and job is not None else None


def _probe(spec: ModelPerfSpec, run: Run, job: Job | None, nodes: int) -> Probe:
    """The run's result with what its log said about memory. Memory per GPU changes with
    the node count: an OOM carried over from more nodes keeps its outcome only."""
    value = swept_value(spec.parameter, run.params, spec.values)
    assert value is not None   # every run of this kind was planned with its value
    outcome = _OUTCOME.get(run.outcome or "", Outcome.FAILED)
    if job is not None and _too_slow(run, job):
        outcome = Outcome.SLOW
    probe = Probe(value, outcome, run.tgs)
    if job is None or run.node_count != nodes:
        return probe
    fixed = (job.mem_total_gb - job.mem_temp_gb
             if job.mem_total_gb is not None and job.mem_temp_gb is not None else None)
    return Probe(probe.value, probe.outcome, probe.tgs, temp_gb=job.mem_temp_gb,
                 fixed_gb=fixed, limit_gb=job.mem_limit_gb, alloc_gb=_alloc(run, job))


def _too_slow(run: Run, job: Job) -> bool:
    """Hung (twice: the hang rule retries once) before step 0, after the compiled-memory
    line said the program fits: the value is too slow, not out of memory."""
    return (run.outcome == "hang" and job.phase == "compile" and job.mem_total_gb is not None
            and job.mem_limit_gb is not None and job.mem_total_gb <= job.mem_limit_gb)


def _latest_jobs(jobs: Sequence[Job]) -> dict[int, Job]:
    """Each run's latest attempt: the one its outcome came from."""
    latest: dict[int, Job] = {}
    for job in sorted(jobs, key=lambda j: (j.attempt, j.id)):
        latest[job.run_id] = job
    return latest


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|bytes|B)?\s*$")
_SCALE = {"KB": 1e-6, "KiB": 1e-6, "MB": 1e-3, "MiB": 1e-3, "GB": 1.0, "GiB": 1.0,
          "TB": 1e3, "TiB": 1e3, "B": 1e-9, "bytes": 1e-9}


def _gb(detail: str | None) -> float | None:
    """An OOM's failed allocation (`12.50GiB`) in GB; GiB and GB are not told apart, as
    Memstats and the compiled-memory line print GB for the same unit."""
    m = _SIZE.match(detail or "")
    return float(m.group(1)) * _SCALE[m.group(2) or "B"] if m else None


def _comparable(run: Run, nodes: int) -> bool:
    """TGS per device and memory per GPU both change with the node count, so after an
    exclusion the search starts over on the nodes left: results from another node set
    never bound this one (not even an OOM on more nodes: the nodes left may differ in
    memory the runtime takes, and a bound carried over is one nobody measured here)."""
    return run.node_count == nodes


def search_space(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> tuple[SearchSpace, str]:
    space, why = _space(spec, ctx)
    # The spec's `multi_peak`: a departure from SKILL.md's single-peak narrowing, so off
    # by default (search/shapes.py's ladder).
    return replace(space, multi_peak=spec.multi_peak), why


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
    # The Memstats were printed by a job on the pinned nodes; param memory per GPU changes
    # with the node count (sharding), so they hold only while all of them are in use.
    same = len(ctx.nodes) == len(spec.node_list)
    settings = spec.overrides
    axes = any(k.endswith("_parallelism") for k in settings)
    sharding = sharding_of(settings, len(ctx.nodes), model.gpus_per_node, model.moe) \
        if axes or "expert_shard_attention_option" in settings else None
    est = memory_estimate(
        replace(model, gpus_per_node=ctx.gpus_per_node), len(ctx.nodes),
        spec.gpu_memory_gib or ctx.gpu_memory_gib,
        spec.mem_fraction or _env_fraction(spec) or 0.93,
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


def _small_start(spec: ModelPerfSpec) -> tuple[SearchSpace, str]:
    """A model whose shape sweepd does not know: no estimate is possible, so the first probe
    is small (likely to fit) and its compiled-memory line predicts the largest fit."""
    space = batch_space(spec.lower, spec.lower, spec.upper, source="no estimate")
    why = f"no shape known for {spec.model}, so no memory estimate"
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


def below_minimum(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> Stop | None:
    """Never shrink the search below the sweep's minimum without asking."""
    if len(ctx.nodes) >= spec.needed_nodes:
        return None
    return Stop(f"only {len(ctx.nodes)} of the {len(spec.node_list)} pinned nodes are "
                f"usable; the sweep needs {spec.needed_nodes} (min_nodes)",
                "nodes.below_minimum", evidence=f"usable: {', '.join(ctx.nodes) or 'none'}")


def plan(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> Plan:
    if open_runs(ctx.runs):
        return []
    short = below_minimum(spec, ctx)
    if short is not None:
        return short
    space, why = search_space(spec, ctx)
    seen = probes(spec, ctx)
    # Every finished run counts against max_runs, also one a node fault spoiled.
    done = len(_finished(ctx))
    extended = spec.extend_budget or BUDGET_STOP in ctx.acknowledged_stops
    budget = spec.max_runs + (EXTRA_RUNS if extended else 0)
    rerun = _rerun(spec, ctx)
    if rerun is not None and done < budget:
        value, because = rerun
        return [NewRun(label=_label(f"{spec.parameter}={value} re-run", ctx),
                       params=run_params(spec.parameter, value), nodes=ctx.nodes,
                       rule="model_perf.contradiction_rerun", reason=because)]
    step = next_probe(space, seen, runs_left=max(0, budget - done))
    if step is None:
        notes = [n for n in (_edge(space, seen), flat_top(space, seen),
                             _not_run(spec, space, seen), _from_earlier(ctx)) if n]
        return _finish(spec, seen, ctx, "; ".join(notes) or None)
    value = step.value
    if done >= budget:
        gap = open_beside_best(space, seen)
        cut = f"max_runs ({budget}) ran out before the search settled"
        if gap is not None and not extended:
            return Stop(f"{cut}: {gap}. Resume to take up to {EXTRA_RUNS} more runs "
                        "there (or set extend_budget: true), abort to keep the best so far",
                        BUDGET_STOP, evidence=f"{spec.parameter}={value} was next")
        left = _not_run(spec, space, seen, cut)
        return _finish(spec, seen, ctx, f"{cut}; {spec.parameter}={value} was next"
                       + (f"; {gap}" if gap else "") + (f"; {left}" if left else ""),
                       settled=False)
    reason = f"next probe {spec.parameter}={value}: {step.why}"
    if not seen:
        reason = f"first probe {spec.parameter}={value}: {step.why}" + \
            ("" if space.start is not None else f"; {why}")
    if any(r.node_count != len(ctx.nodes) for r in _finished(ctx)):
        reason += (f"; on {len(ctx.nodes)} nodes: runs on other node sets are not compared "
                   "and bound nothing here")
    return [NewRun(label=_label(f"{spec.parameter}={value}", ctx),
                   params=run_params(spec.parameter, value),
                   nodes=ctx.nodes, rule="model_perf.upper_bound_probe", reason=reason)]


def _rerun(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> tuple[Value, str] | None:
    """A silent failure below a pass on these nodes, not yet re-run: (value, why)."""
    runs = _counted(ctx)
    spoiled = _below_a_pass(spec, runs, _latest_jobs(ctx.jobs))
    times = Counter(swept_value(spec.parameter, r.params, spec.values) for r in runs)
    for run in runs:
        value = swept_value(spec.parameter, run.params, spec.values)
        if run.id in spoiled and times[value] < 2:
            assert value is not None
            return value, spoiled[run.id]
    return None


def _edge(space: SearchSpace, seen: list[Probe]) -> str | None:
    """The best is the highest value there was to try: the curve may still be rising."""
    top = best(seen)
    if top is None or not space.ordered or top.value != space.candidates[-1]:
        return None
    return "it is the highest value searched, so a higher one may be faster"


def _from_earlier(ctx: SweepContext[PerfFacts]) -> str | None:
    prior = ctx.facts.prior
    return (f"values not run here are judged by sweep #{prior.sweep}'s runs, their TGS "
            "scaled by the values both sweeps ran") if prior else None


def _label(base: str, ctx: SweepContext[PerfFacts]) -> str:
    """Unique in the sweep: a value runs again after an exclusion (on fewer nodes) or after
    a node fault spoiled its run."""
    taken = {r.label for r in ctx.runs}
    label, n = base, 1
    while label in taken:
        label = f"{base} on {len(ctx.nodes)}N" + (f" #{n}" if n > 1 else "")
        n += 1
    return label


def _not_run(spec: ModelPerfSpec, space: SearchSpace, seen: list[Probe],
             cut: str = "the search did not need it") -> str | None:
    """Given values the search did not run, each with what ruled it out (`cut`: when
    nothing did), so that a reader does not take them as lost."""
    why: dict[str, list[str]] = {}
    for v, reason in why_not_run(space, seen, spec.values or ()).items():
        why.setdefault(reason or cut, []).append(str(v))
    return ("not run: " + "; ".join(f"{', '.join(vs)} ({r})" for r, vs in why.items())
            if why else None)


def _finish(spec: ModelPerfSpec, seen: list[Probe], ctx: SweepContext[PerfFacts],
            caveat: str | None, settled: bool = True) -> Finished:
    top = best(seen)
    if top is None:
        return Finished(False, f"{spec.model}: no {spec.parameter} value ran successfully "
                               f"({_runs(len(seen))})", {"parameter": spec.parameter, "best": None})
    # An optimum holds for the node count it was measured on: say so when an exclusion
    # left fewer nodes than were pinned.
    pinned, ran = len(spec.node_list), len(ctx.nodes)
    on = f" on {ran} of the {pinned} pinned nodes" if ran < pinned else ""
    verdict: dict[str, Any] = {
        "parameter": spec.parameter, "best": top.value, "tgs": top.tgs, "runs": len(seen),
        "nodes": ran, "settled": settled, "caveat": caveat,
        "proposal": f"{spec.parameter}: {top.value}  # configs/{spec.model}.gpu.yml"
                    + (f", measured on {ran}N" if on else ""),
    }
    what = "optimum" if settled else "best so far"
    return Finished(True, f"{spec.model}: {what} {spec.parameter}={top.value} at "
                          f"{top.tgs:,.0f} TGS/device{on} ({_runs(len(seen))})"
                          + (f"; {caveat}" if caveat else ""), verdict)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


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
