"""Model perf sweep planning: from the runs so far to the next probe or the optimum."""

from __future__ import annotations

from typing import Any

from sweepd.kinds.api import Finished, NewRun, Plan, Stop, SweepContext, open_runs
from sweepd.kinds.model_perf.estimate import memory_estimate
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    best,
    next_value,
)
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.monitor.facts import FailureClass
from sweepd.store.rows import Run
from sweepd.util.model_shapes import resolve_model

_OUTCOME = {"pass": Outcome.OK, "oom": Outcome.OOM}
MAX_BATCH = 4096
# Failures of a node, of the infrastructure or a person's cancel say nothing about the
# value: such a run must not become the search's upper bound (the value is tried again, on
# the nodes left). docs/architecture.md "Failure classes" has the whole table.
NOT_ABOUT_THE_VALUE = frozenset({
    FailureClass.GPU_HARDWARE, FailureClass.ECC, FailureClass.NODE_CRASH, FailureClass.NIC,
    FailureClass.NO_GPU, FailureClass.PULL, FailureClass.CHECKOUT_OUTAGE,
    FailureClass.CONTROLLER_DOWN, FailureClass.CANCELLED, FailureClass.LOG_LOST,
})


def _finished(ctx: SweepContext) -> list[Run]:
    return [r for r in ctx.runs if r.state in ("passed", "failed")]


def probes(spec: ModelPerfSpec, ctx: SweepContext) -> list[Probe]:
    return [Probe(r.params[spec.parameter], _OUTCOME.get(r.outcome or "", Outcome.FAILED),
                  r.tgs) for r in _finished(ctx)
            if _comparable(r, len(ctx.nodes))
            and (r.outcome == "pass" or r.failure_class not in NOT_ABOUT_THE_VALUE)]


def _comparable(run: Run, nodes: int) -> bool:
    """TGS per device and memory per GPU both change with the node count, so after an
    exclusion the search starts over on the nodes left. Only an OOM on more nodes carries
    over: fewer nodes shard the model less, so that value runs out of memory here too."""
    return run.node_count == nodes or (run.node_count > nodes and run.outcome == "oom")


def search_space(spec: ModelPerfSpec, ctx: SweepContext) -> tuple[SearchSpace, str]:
    if spec.values is not None:
        ordered = all(isinstance(v, int | float) for v in spec.values)
        values = tuple(sorted(spec.values) if ordered else spec.values)
        return SearchSpace(values, None, ordered), f"{len(values)} given values"
    model = resolve_model(spec.model)
    est = memory_estimate(
        model, len(ctx.nodes), spec.gpu_memory_gib or ctx.gpu_memory_gib,
        spec.mem_fraction or _env_fraction(spec) or 0.93,
        seq_len=_int(spec.overrides.get("max_target_length")),
        prior_param_gb=ctx.prior_param_gb,
    )
    space = batch_space(est.max_batch, spec.lower, spec.upper)
    if spec.upper is None:
        space = extend_past_estimate(space, est.max_batch, spec.lower, probes(spec, ctx))
    why = (f"memory {est.source}: pool {est.pool_gb:.1f} GB - params {est.param_gb:.1f} GB = "
           f"{est.available_gb:.1f} GB / {est.per_batch_gb:.2f} GB per batch"
           f" -> max ~{est.max_batch}")
    return space, why


def extend_past_estimate(space: SearchSpace, estimate: int, lower: int,
                         seen: list[Probe]) -> SearchSpace:
    """The estimate was too low: the top of the grid ran fine and nothing failed yet, so
    the grid doubles upward (SKILL.md Step 7: "probe higher if room remains"). It also keeps
    covering every value probed after such a doubling, so a failure up there (an OOM past
    the old top) bounds the search instead of being ignored and ending it early."""
    def wants_more(space: SearchSpace) -> bool:
        top = int(space.candidates[-1])
        values = {p.value for p in seen}
        if any(isinstance(v, int | float) and v > top for v in values):
            return True
        return bool(seen) and all(p.outcome == Outcome.OK for p in seen) and top in values

    while wants_more(space) and int(space.candidates[-1]) < MAX_BATCH:
        space = batch_space(estimate, lower, min(MAX_BATCH, 2 * int(space.candidates[-1])))
    return space


def plan(spec: ModelPerfSpec, ctx: SweepContext) -> Plan:
    if open_runs(ctx.runs):
        return []
    if len(ctx.nodes) < spec.needed_nodes:
        # Never shrink the search below the sweep's minimum without asking.
        return Stop(f"only {len(ctx.nodes)} of the {len(spec.node_list)} pinned nodes are "
                    f"usable; the sweep needs {spec.needed_nodes} (min_nodes)",
                    "nodes.below_minimum", evidence=f"usable: {', '.join(ctx.nodes) or 'none'}")
    space, why = search_space(spec, ctx)
    seen = probes(spec, ctx)
    # Every finished run counts against max_runs, also one a node fault spoiled.
    value = next_value(space, seen)
    if value is None:
        notes = [n for n in (_edge(space, seen), _not_run(spec, seen)) if n]
        return _finish(spec, seen, ctx, "; ".join(notes) or None)
    if len(_finished(ctx)) >= spec.max_runs:
        return _finish(spec, seen, ctx, f"max_runs ({spec.max_runs}) ran out before the search "
                                        f"settled; {spec.parameter}={value} was next",
                       settled=False)
    first = "first probe" if not seen else "next probe"
    if any(r.node_count != len(ctx.nodes) for r in _finished(ctx)):
        why += (f"; on {len(ctx.nodes)} nodes: runs on other node counts are not compared, "
                "except an OOM on more nodes")
    estimate = None if space.estimate_index is None else space.candidates[space.estimate_index]
    if isinstance(value, int | float) and isinstance(estimate, int | float) and value > estimate:
        why = f"climbing above the memory estimate; {why}"
    return [NewRun(label=_label(f"{spec.parameter}={value}", ctx), params={spec.parameter: value},
                   nodes=ctx.nodes, rule="model_perf.upper_bound_probe",
                   reason=f"{first} {spec.parameter}={value} ({why})")]


def _edge(space: SearchSpace, seen: list[Probe]) -> str | None:
    """The best is the highest value there was to try: the curve may still be rising."""
    top = best(seen)
    if top is None or not space.ordered or top.value != space.candidates[-1]:
        return None
    return "it is the highest value searched, so a higher one may be faster"


def _label(base: str, ctx: SweepContext) -> str:
    """Unique in the sweep: a value runs again after an exclusion (on fewer nodes) or after
    a node fault spoiled its run."""
    taken = {r.label for r in ctx.runs}
    label, n = base, 1
    while label in taken:
        label = f"{base} on {len(ctx.nodes)}N" + (f" #{n}" if n > 1 else "")
        n += 1
    return label


def _not_run(spec: ModelPerfSpec, seen: list[Probe]) -> str | None:
    """Given values the search did not need, so that a reader does not take them as lost."""
    ran = {p.value for p in seen}
    left = [str(v) for v in spec.values or () if v not in ran]
    return (f"not run: {', '.join(left)} (the runs around them rule them out: an OOM below, "
            "or a TGS curve that cannot beat the best there)") if left else None


def _finish(spec: ModelPerfSpec, seen: list[Probe], ctx: SweepContext,
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
