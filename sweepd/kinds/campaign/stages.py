"""A campaign's stage as a sweep (pure): the spec a person would submit for it, made from
the earlier stages' typed results, and the chat lines of its start and of its end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweepd.kinds.api import StartSweep
from sweepd.kinds.campaign.gather import CampaignFacts
from sweepd.kinds.campaign.results import HEALTHY, candidate
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.store.states import SweepState
from sweepd.util.hostlists import collect_nodes

KIND_OF_STAGE = {"health": "node-perf", "network": "network", "batch": "model-perf",
                 "flags": "xla-tuning", "confirm": "campaign"}


@dataclass(frozen=True)
class Step:
    """One sweep of the campaign: its stage, its key in the store (the stage, and with
    several parallelisms the one it is for), and that parallelism (none for node health)."""

    stage: str
    key: str
    par: str | None = None


def steps(spec: CampaignSpec) -> list[Step]:
    """The campaign's sweeps in order: node health is node perf, then, for jobs of more than
    one node, the network check on the nodes node perf kept (its whole-group baseline
    against what the single-node figures predict; isolation only when it is slower); then
    batch, flags and confirm for each parallelism in the spec's order."""
    out: list[Step] = []
    if "health" in spec.stages:
        out.append(Step("health", "health"))
        if spec.job_nodes > 1:
            out.append(Step("network", "network"))
    for par in spec.parallelisms:
        out += [Step(s, spec.key(s, par), par) for s in spec.stages if s != "health"]
    return out


def stage_spec(spec: CampaignSpec, step: Step, facts: CampaignFacts,
               nodes: list[str]) -> dict[str, Any]:
    """The stage's sweep spec, as a person would submit it, from the typed results so far."""
    hours = spec.stage_hours()["health" if step.stage == "network" else step.key]
    base: dict[str, Any] = {"name": f"{spec.name or spec.default_name()}: {step.key}"[:80],
                            "kind": KIND_OF_STAGE[step.stage], "steps": spec.steps}
    if spec.env:
        base["env"] = dict(spec.env)
    if step.stage == "health":
        return {**base, "model": spec.health_model, "nodes": spec.nodes}
    if step.stage == "network":
        return {**base, "model": spec.health_model, "nodes": collect_nodes(nodes),
                **({"node_perf_sweep": facts.health.sweep} if facts.health else {})}
    par = step.par or spec.parallelisms[0]
    cell = facts.cell(par)
    pinned = {"model": spec.model, "nodes": collect_nodes(nodes), "parallelism": par,
              "overrides": dict(spec.overrides)}
    if step.stage == "batch":
        # Model perf's parallelism passes the axes as overrides, every node in every job.
        return {**base, **pinned, **spec.batch_stage}
    if step.stage == "flags":
        extra: dict[str, Any] = {"per_device_batch_size": cell.batch.best} \
            if cell.batch is not None else {}
        thresholds = {"max_queue_hours": round(max(hours, 0.1), 2),
                      **spec.flags_stage.get("thresholds", {})}
        keep = {"keep_profiles": True} if spec.keep_profiles else {}
        return {**base, **pinned, **extra, **keep, **spec.flags_stage, "thresholds": thresholds}
    return {**base, **pinned, "stages": ["confirm"], "budget_hours": round(max(hours, 0.01), 2),
            "confirm_runs": spec.confirm_runs, "candidate": candidate(cell)}


def ended(spec: CampaignSpec, step: Step, facts: CampaignFacts) -> str:
    """The chat line of a stage's end: its result and the sweep that holds the evidence."""
    child = facts.children.get(step.key)
    where = f" (sweep {child.id})" if child else ""
    name = step.key
    if child is not None and child.state != SweepState.DONE:
        return f"stage {name} ended {child.state} without a result{where}: skipped"
    cell = facts.cell(step.par) if step.par else None
    if step.stage == "health" and facts.health is not None:
        out = [n for n, s in facts.health.status.items() if s not in HEALTHY]
        return f"stage health ended{where}: " + (f"excluded {', '.join(out)}" if out
                                                   else "every node healthy")
    if step.stage == "network" and facts.network is not None:
        ex = facts.network.excluded
        return f"stage health (network) ended{where}: " + (
            "excluded " + "; ".join(f"{n}: {w}" for n, w in ex.items()) if ex
            else facts.network.recommendation or "no network issue")
    if step.stage == "batch" and cell is not None and cell.batch is not None:
        tgs = f" at {cell.batch.tgs:,.0f} TGS/device" if cell.batch.tgs else ""
        return f"stage {name} ended{where}: per_device_batch_size={cell.batch.best}{tgs}"
    if step.stage == "flags" and cell is not None and cell.flags is not None:
        f = cell.flags
        if not f.found:
            return f"stage {name} ended{where}: {f.verdict}, no recipe (the deployed flags stay)"
        gain = f" {f.gain:+.2%}" if f.gain is not None else ""
        return f"stage {name} ended{where}: {' '.join(f.xla_flags)}{gain} vs baseline-deployed"
    if step.stage == "confirm" and cell is not None and cell.confirm is not None:
        return f"stage {name} ended{where}: {cell.confirm.claim}"
    return f"stage {name} ended{where}"


def start(spec: CampaignSpec, step: Step, facts: CampaignFacts, nodes: list[str],
          first: bool, before: str | None = None) -> StartSweep:
    """The stage's sweep started, with the kickoff (first), the last stage's end and this
    one's start with its inputs and ETA as the campaign's chat lines."""
    hours = spec.stage_hours()
    hours = {**hours, "network": hours.get("health", 0.0)}
    lines = [before] if before else []
    if first:
        plan_text = ", ".join(f"{s} ~{h:.1f} h" for s, h in hours.items() if s != "network")
        lines.append(f"campaign {spec.model} {spec.shown} on {spec.nodes} "
                     f"({len(spec.node_list)} nodes, {spec.job_nodes} per job): stages "
                     f"{plan_text} (budget {spec.budget_hours:g} h)")
    left = max(0.0, spec.budget_hours - facts.spent_hours)
    lines.append(f"stage {step.key}: starting ({KIND_OF_STAGE[step.stage]}; ETA "
                 f"~{hours[step.key]:.1f} h, {left:.1f} h of the budget left)"
                 + _inputs(step, facts, nodes))
    cell = facts.cell(step.par) if step.par else None
    batch = cell.batch.best if cell is not None and cell.batch is not None else None
    recipe = list(cell.flags.xla_flags) if cell is not None and cell.flags is not None \
        and cell.flags.found else None
    return StartSweep(step.key, stage_spec(spec, step, facts, nodes),
                      # The frozen nodelist, once node health has found it.
                      nodes=collect_nodes(nodes) if step.par else None,
                      batch=batch, recipe=recipe, progress=lines)


def _inputs(step: Step, facts: CampaignFacts, nodes: list[str]) -> str:
    if step.stage == "health":
        return ""
    said = [f" on {collect_nodes(nodes)}"]
    cell = facts.cell(step.par) if step.par else None
    if cell is not None and step.stage in ("flags", "confirm") and cell.batch is not None:
        said.append(f"batch {cell.batch.best} (sweep {cell.batch.sweep})")
    if cell is not None and step.stage == "confirm" and cell.flags is not None:
        said.append(f"recipe {' '.join(cell.flags.xla_flags) or 'none'}")
    return ", ".join(said)
