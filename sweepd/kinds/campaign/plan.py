"""The campaign's state machine over its stages' sweeps (pure): the first stage without a
sweep is started with what the earlier stages found (their typed results), a stage still
running is waited for, a stage that stopped to ask stops the campaign and asks, and once
every stage has its result the campaign ends with them. A confirm stage alone runs its
A/B runs itself (`confirm.plan`).

Stage by stage (the seeds' dependency order):
  health   node perf on every node of the slot; degraded and unhealthy nodes are excluded
           with their evidence (the node perf sweep); the first healthy nodes the
           parallelism needs are frozen for the rest; fewer than it needs: stop and ask
  batch    model perf on the frozen nodes with the parallelism's overrides
  flags    xla-tuning at the batch found, on the frozen nodes; a bounded search is a
           result (no recipe), not a stop
  confirm  a confirm campaign: baseline-deployed against batch + recipe, interleaved
"""

from __future__ import annotations

from typing import Any

from sweepd.core.states import SweepState
from sweepd.kinds.api import Finished, Plan, StartSweep, Stop, SweepContext
from sweepd.kinds.campaign import confirm
from sweepd.kinds.campaign.gather import CampaignFacts, Child
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.util.hostlists import collect_nodes

HEALTHY = ("healthy", "marginal")   # node perf's bands a campaign keeps
KIND_OF_STAGE = {"health": "node-perf", "network": "network", "batch": "model-perf",
                 "flags": "xla-tuning", "confirm": "campaign"}


def steps(spec: CampaignSpec) -> list[tuple[str, str]]:
    """(stage, step) in order: node health is node perf, then, for jobs of more than one
    node, the network check on the nodes node perf kept (its whole-group baseline against
    what the single-node figures predict; isolation only when it is slower)."""
    out: list[tuple[str, str]] = []
    for stage in spec.stages:
        out.append((stage, stage))
        if stage == "health" and spec.job_nodes > 1:
            out.append((stage, "network"))
    return out


def healthy_nodes(spec: CampaignSpec, facts: CampaignFacts) -> list[str]:
    """The slot's nodes node perf and the network check kept, in the slot's order."""
    nodes = spec.node_list
    if facts.health is not None:
        nodes = [n for n in nodes if facts.health.status.get(n) in HEALTHY]
    if facts.network is not None:
        nodes = [n for n in nodes if n not in facts.network.excluded]
    return nodes


def frozen_nodes(spec: CampaignSpec, facts: CampaignFacts) -> list[str] | None:
    """The nodes every later stage runs on: the first healthy ones the parallelism needs, in
    the slot's order (the rest are spares). None: too few healthy nodes."""
    nodes = healthy_nodes(spec, facts)
    return nodes[:spec.job_nodes] if len(nodes) >= spec.job_nodes else None


def excluded(spec: CampaignSpec, facts: CampaignFacts) -> dict[str, str]:
    """Each node the health stage left out, with its band and delta (the evidence)."""
    out: dict[str, str] = {}
    for node in spec.node_list if facts.health is not None else ():
        status = facts.health.status.get(node) if facts.health else None
        if status not in HEALTHY:
            delta = facts.health.delta.get(node) if facts.health else None
            out[node] = f"{status}" + (f" ({delta:+.1%} vs the median)"
                                       if isinstance(delta, int | float) else "")
    if facts.network is not None:
        out.update({n: f"network: {why}" for n, why in facts.network.excluded.items()
                    if n not in out})
    return out


def candidate(facts: CampaignFacts) -> dict[str, Any]:
    """The confirm stage's candidate from the batch and flags stages' results."""
    out: dict[str, Any] = {}
    if facts.batch is not None:
        out["batch"] = facts.batch.best
    if facts.flags is not None and facts.flags.found:
        out["xla_flags"] = list(facts.flags.xla_flags)
        out["env"] = dict(facts.flags.env)
    return out


def stage_spec(spec: CampaignSpec, stage: str, facts: CampaignFacts,
               nodes: list[str]) -> dict[str, Any]:
    """The stage's sweep spec, as a person would submit it, from the typed results so far."""
    hours = spec.stage_hours()["health" if stage == "network" else stage]
    base: dict[str, Any] = {"name": f"{spec.name or spec.default_name()}: {stage}"[:80],
                            "kind": KIND_OF_STAGE[stage], "steps": spec.steps}
    if spec.env:
        base["env"] = dict(spec.env)
    if stage == "health":
        return {**base, "model": spec.health_model, "nodes": spec.nodes}
    if stage == "network":
        return {**base, "kind": "network", "model": spec.health_model,
                "nodes": collect_nodes(nodes),
                **({"node_perf_sweep": facts.health.sweep} if facts.health else {})}
    pinned = collect_nodes(nodes)
    if stage == "batch":
        return {**base, "model": spec.model, "nodes": pinned, "min_nodes": len(nodes),
                "overrides": {**spec.overrides, **spec.parallelism_overrides()},
                **spec.batch_stage}
    if stage == "flags":
        extra: dict[str, Any] = {"per_device_batch_size": facts.batch.best} \
            if facts.batch is not None else {}
        thresholds = {"max_queue_hours": round(max(hours, 0.1), 2),
                      **spec.flags_stage.get("thresholds", {})}
        return {**base, "model": spec.model, "nodes": pinned, "parallelism": spec.parallelism,
                "overrides": dict(spec.overrides), **extra, **spec.flags_stage,
                "thresholds": thresholds}
    return {**base, "model": spec.model, "nodes": pinned, "parallelism": spec.parallelism,
            "stages": ["confirm"], "budget_hours": round(max(hours, 0.01), 2),
            "confirm_runs": spec.confirm_runs, "overrides": dict(spec.overrides),
            "candidate": candidate(facts)}


def _ended(stage: str, facts: CampaignFacts) -> str:
    """The chat line of a stage's end: its result and the sweep that holds the evidence."""
    child = facts.children.get(stage)
    where = f" (sweep {child.id})" if child else ""
    if child is not None and child.state != SweepState.DONE:
        return f"stage {stage} ended {child.state} without a result{where}: skipped"
    if stage == "health" and facts.health is not None:
        out = [n for n, s in facts.health.status.items() if s not in HEALTHY]
        return f"stage health ended{where}: " + (f"excluded {', '.join(out)}" if out
                                                   else "every node healthy")
    if stage == "network" and facts.network is not None:
        ex = facts.network.excluded
        return f"stage health (network) ended{where}: " + (
            "excluded " + "; ".join(f"{n}: {w}" for n, w in ex.items()) if ex
            else facts.network.recommendation or "no network issue")
    if stage == "batch" and facts.batch is not None:
        tgs = f" at {facts.batch.tgs:,.0f} TGS/device" if facts.batch.tgs else ""
        return f"stage batch ended{where}: per_device_batch_size={facts.batch.best}{tgs}"
    if stage == "flags" and facts.flags is not None:
        f = facts.flags
        if not f.found:
            return f"stage flags ended{where}: {f.verdict}, no recipe (the deployed flags stay)"
        gain = f" {f.gain:+.2%}" if f.gain is not None else ""
        return f"stage flags ended{where}: {' '.join(f.xla_flags)}{gain} vs baseline-deployed"
    return f"stage {stage} ended{where}"


def _start(spec: CampaignSpec, stage: str, facts: CampaignFacts, nodes: list[str],
           first: bool, ended: str | None = None) -> StartSweep:
    hours = spec.stage_hours()
    hours = {**hours, "network": hours.get("health", 0.0)}
    lines = [ended] if ended else []
    if first:
        plan_text = ", ".join(f"{s} ~{h:.1f} h" for s, h in hours.items() if s != "network")
        lines.append(f"campaign {spec.model} {spec.parallelism} on {spec.nodes} "
                     f"({len(spec.node_list)} nodes, {spec.job_nodes} per job): stages "
                     f"{plan_text} (budget {spec.budget_hours:g} h)")
    left = max(0.0, spec.budget_hours - facts.spent_hours)
    lines.append(f"stage {stage}: starting ({KIND_OF_STAGE[stage]}; ETA ~{hours[stage]:.1f} h, "
                 f"{left:.1f} h of the budget left)"
                 + _inputs(stage, facts, nodes))
    recipe = list(facts.flags.xla_flags) if facts.flags is not None and facts.flags.found \
        else None
    return StartSweep(stage, stage_spec(spec, stage, facts, nodes),
                      # The frozen nodelist, once node health has found it.
                      nodes=collect_nodes(nodes) if stage not in ("health", "network")
                      else None,
                      batch=facts.batch.best if facts.batch is not None else None,
                      recipe=recipe, progress=lines)


def _inputs(stage: str, facts: CampaignFacts, nodes: list[str]) -> str:
    if stage == "health":
        return ""
    said = [f" on {collect_nodes(nodes)}"]
    if stage in ("flags", "confirm") and facts.batch is not None:
        said.append(f"batch {facts.batch.best} (sweep {facts.batch.sweep})")
    if stage == "confirm" and facts.flags is not None:
        said.append(f"recipe {' '.join(facts.flags.xla_flags) or 'none'}")
    return ", ".join(said)


def _stopped(stage: str, child: Child, ctx: SweepContext[CampaignFacts]) -> Plan:
    rule = f"campaign.stage_stopped.{child.id}"
    if rule in ctx.acknowledged_stops:
        return []   # the person answered; the stage's sweep waits for its own word
    return Stop(f"stage {stage} (sweep {child.id}) stopped and asks: {child.reason}. "
                f"Resume sweep {child.id} to go on with the stage, abort it to skip the "
                "stage, then resume this campaign; or abort the campaign", rule,
                evidence=f"sweep {child.id}: {child.reason}")


def plan(spec: CampaignSpec, ctx: SweepContext[CampaignFacts]) -> Plan:
    if spec.runs_itself:
        return confirm.plan(spec, ctx)
    facts = ctx.facts
    order = steps(spec)
    for i, (_, stage) in enumerate(order):
        nodes = (spec.node_list if stage == "health" else healthy_nodes(spec, facts)
                 if stage == "network" else frozen_nodes(spec, facts))
        if nodes is None or len(nodes) < spec.job_nodes:
            return _too_few(spec, facts, ctx)
        child = facts.children.get(stage)
        if child is None and facts.spent_hours >= spec.budget_hours:
            return Finished(True, f"budget spent ({facts.spent_hours:.1f} h of "
                                  f"{spec.budget_hours:g} h) before stage {stage}: the "
                                  f"campaign ends with what it has: {summary(spec, facts)}",
                            {**verdict(spec, facts), "budget_spent": True})
        if child is None and stage == "confirm" and not candidate(facts):
            # The stages before found nothing to change: baseline against itself proves
            # nothing, so nothing is run.
            return Finished(True, f"{summary(spec, facts)}; nothing to confirm: the deployed "
                                  "configuration stays", verdict(spec, facts))
        if child is None:
            return _start(spec, stage, facts, nodes, first=i == 0 and not facts.children,
                          ended=_ended(order[i - 1][1], facts) if i else None)
        if child.state in (SweepState.QUEUED, SweepState.RUNNING):
            return []
        if child.state == SweepState.AWAITING_DECISION:
            return _stopped(stage, child, ctx)
        if child.state == SweepState.FAILED and stage in ("health", "network"):
            return Finished(False, f"campaign: node health failed (sweep {child.id}): "
                                   f"{child.reason}", verdict(spec, facts))
    return Finished(True, summary(spec, facts), verdict(spec, facts))


def _too_few(spec: CampaignSpec, facts: CampaignFacts, ctx: SweepContext[CampaignFacts]
             ) -> Plan:
    left = [n for n in spec.node_list if n not in excluded(spec, facts)]
    rule = "campaign.too_few_nodes"
    if rule in ctx.acknowledged_stops:
        return Finished(False, "campaign ended: too few healthy nodes", verdict(spec, facts))
    return Stop(f"only {len(left)} healthy node(s) in the slot ({collect_nodes(left) or 'none'})"
                f"; {spec.parallelism} needs {spec.job_nodes}. Add nodes (a new campaign), or "
                "abort", rule, evidence="; ".join(f"{n}: {w}" for n, w in
                                                   excluded(spec, facts).items()))


def summary(spec: CampaignSpec, facts: CampaignFacts) -> str:
    parts = []
    if facts.health is not None:
        ex = excluded(spec, facts)
        parts.append(f"excluded {', '.join(ex) or 'no node'}")
    if facts.batch is not None:
        parts.append(f"batch {facts.batch.best}")
    if facts.flags is not None:
        parts.append(f"recipe {' '.join(facts.flags.xla_flags)}" if facts.flags.found
                     else f"no recipe (xla-tuning {facts.flags.verdict})")
    if facts.confirm is not None:
        parts.append(facts.confirm.claim)
    return f"campaign {spec.model} {spec.parallelism}: " + "; ".join(parts or ["no result"])


def verdict(spec: CampaignSpec, facts: CampaignFacts) -> dict[str, Any]:
    """Each stage's result and the sweep it came from (the report and the plot read it)."""
    out: dict[str, Any] = {"model": spec.model, "parallelism": spec.parallelism,
                           "stages": list(spec.stages),
                           "sweeps": {s: c.id for s, c in facts.children.items()},
                           "skipped": [s for s, c in facts.children.items()
                                       if c.state in (SweepState.ABORTED, SweepState.FAILED)]}
    nodes = frozen_nodes(spec, facts)
    out["nodes"] = collect_nodes(nodes) if nodes else None
    if facts.health is not None:
        out["health"] = {"median": facts.health.median, "excluded": excluded(spec, facts),
                         **({"network": facts.network.recommendation}
                            if facts.network is not None else {})}
    if facts.batch is not None:
        out["batch"] = {"best": facts.batch.best, "tgs": facts.batch.tgs}
    if facts.flags is not None:
        f = facts.flags
        out["flags"] = {"verdict": f.verdict, "profile": f.profile, "xla_flags": list(f.xla_flags),
                        "env": dict(f.env), "gain": f.gain,
                        "interval": list(f.interval) if f.interval else None,
                        "baseline_tgs": f.baseline_tgs, "recipe_tgs": f.recipe_tgs}
    if facts.confirm is not None:
        out["confirmed"] = facts.confirm.as_dict()
    return out
