"""Two-parameter model perf planning: the batch with a second knob (grid.py), from the runs
so far to the next (batch, second value) or the winning combination."""

from __future__ import annotations

from typing import Any

from sweepd.kinds.api import Finished, NewRun, Plan, Stop, SweepContext, open_runs
from sweepd.kinds.model_perf import plan as one
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.params import ENV_PREFIX, pair_params, swept_value
from sweepd.kinds.model_perf.probes import counted_runs, finished_runs, latest_jobs, probe_of
from sweepd.kinds.model_perf.rules import (
    BEST_SO_FAR,
    BUDGET_GAP,
    NO_PASS,
    OPTIMUM,
    TWO_PARAM_PROBE,
)
from sweepd.kinds.model_perf.search import means
from sweepd.kinds.model_perf.search_space import search_space
from sweepd.kinds.model_perf.spec import ModelPerfSpec, SecondKnob
from sweepd.kinds.model_perf.two_param.grid import next_pair, settled_notes
from sweepd.kinds.model_perf.two_param.pairs import Pair, PairStep, best_pair, is_fraction
from sweepd.kinds.model_perf.verdict import Caveat, Verdict, caveat, caveats, summary, tgs_range
from sweepd.kinds.model_perf.verdict import CaveatKind as K
from sweepd.store.rows import Run


def plan(spec: ModelPerfSpec, ctx: SweepContext[PerfFacts]) -> Plan:
    """The kind's planner: a spec with `second` searches both, else the batch alone."""
    if spec.second is None:
        return one.plan(spec, ctx)
    second = spec.second
    if open_runs(ctx.runs):
        return []
    short = one.below_minimum(spec, ctx)
    if short is not None:
        return short
    space, why = search_space(spec, ctx)
    seen = pairs(spec, second, ctx)
    done = len(finished_runs(ctx))
    budget, extended = one.runs_budget(spec, ctx)
    step = next_pair(space, second.parameter, second.values, seen, runs_left=max(0, budget - done))
    name = _name(second)
    asked = None if extended else unfinished_at_budget(spec, second, step, done, budget)
    if asked is not None:
        return asked
    if step is None or done >= budget:
        cut = None if step is None else \
            f"{one.budget_cut(budget)}; {name}={step.second}, " \
            f"{spec.parameter}={step.value} was next"
        notes = settled_notes(space, second.parameter, second.values, seen)
        return _finish(spec, second, seen, notes, cut, len(ctx.nodes))
    label = one._label(f"{spec.parameter}={step.value} {name}={step.second}", ctx)
    reason = (f"{'first' if not seen else 'next'} probe {spec.parameter}={step.value} at "
              f"{name}={step.second}: {step.why}" + ("" if seen else f"; {why}"))
    return [NewRun(label=label, params=pair_params(spec.parameter, step.value,
                                                   second.parameter, step.second),
                   nodes=ctx.nodes, rule=TWO_PARAM_PROBE.id, reason=reason)]


def unfinished_at_budget(spec: ModelPerfSpec, second: SecondKnob, step: PairStep | None,
                         done: int, budget: int) -> Stop | None:
    """`model_perf.budget_gap` for two knobs: as the one-parameter planner does, a
    setting's search unfinished at the budget may hold a faster combination (red team t01:
    cut at 20 runs, the best so far 4.8 % under the true best, save_dot_except_mlp's search
    one run in), so the sweep asks for more runs."""
    if step is None or done < budget:
        return None
    name = _name(second)
    return Stop(one.ask_more(f"{one.budget_cut(budget)}: {name}={step.second}, "
                             f"{spec.parameter}={step.value} was next ({step.why})"),
                BUDGET_GAP.id,
                evidence=f"{name}={step.second}, {spec.parameter}={step.value} was next")


def pairs(spec: ModelPerfSpec, second: SecondKnob, ctx: SweepContext[PerfFacts]
          ) -> list[Pair]:
    """Each counted run as (its second value, its probe). No contradiction re-run here:
    a failure below a pass may be another setting's (less memory), not a contradiction."""
    latest = latest_jobs(ctx.jobs)
    out: list[Pair] = []
    for run in counted_runs(ctx):
        value = second_value(second, run)
        if value is not None:
            out.append((value, probe_of(spec, run, latest.get(run.id), len(ctx.nodes))))
    return out


def second_value(second: SecondKnob, run: Run) -> Any:
    """The run's second value, as the spec's candidate it was written from (an
    environment variable comes back as text)."""
    return swept_value(second.parameter, run.params, second.values)


def _name(second: SecondKnob) -> str:
    return second.parameter.removeprefix(ENV_PREFIX)


def _finish(spec: ModelPerfSpec, second: SecondKnob, seen: list[Pair],
            notes: dict[Any, str], cut: str | None, nodes: int) -> Finished:
    name = _name(second)
    top = best_pair(seen)
    if top is None:
        failed = Verdict(NO_PASS.id, spec.model, spec.parameter, None, None, len(seen),
                         second=name)
        return Finished(False, summary(failed),
                        {"parameter": spec.parameter, "second": second.parameter, "best": None},
                        NO_PASS.id)
    value, probe = top
    own = means([p for s, p in seen if s == value])[probe.value]
    found = Verdict(
        (OPTIMUM if cut is None else BEST_SO_FAR).id, spec.model, spec.parameter, probe.value,
        probe.tgs, len(seen), cut is None,
        caveats(*(Caveat(K.SETTING, f"{name}={s}: {why}", {"second": s})
                  for s, why in notes.items()), caveat(K.BUDGET, cut)),
        tgs_range([p.tgs for p in own if p.tgs is not None]), second=name, second_value=value)
    verdict: dict[str, Any] = {
        "parameter": spec.parameter, "best": probe.value, "tgs": probe.tgs, "runs": len(seen),
        "second": second.parameter, "second_best": value, "nodes": nodes,
        "settled": cut is None, "caveat": found.caveat_text(),
        "proposal": _proposal(spec, second, probe.value, value), **found.as_dict(),
    }
    return Finished(True, summary(found), verdict, found.rule)


def _proposal(spec: ModelPerfSpec, second: SecondKnob, batch: Any, value: Any) -> str:
    """Where each of the two goes: the batch and a remat policy in the model's .gpu.yml, a
    memory fraction (an environment variable) in its .env.sh."""
    gpu = f"configs/{spec.model}.gpu.yml"
    if is_fraction(second.parameter):
        return (f"{spec.parameter}: {batch}  # {gpu}; {_name(second)}={value}  "
                f"# configs/{spec.model}.env.sh")
    return f"{spec.parameter}: {batch}, {second.parameter}: {value}  # {gpu}"
