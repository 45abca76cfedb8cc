"""The campaign's state machine over its stages' sweeps (pure): the first stage without a
sweep is started with what the earlier stages found (their typed results), a stage still
running is waited for, a stage that stopped to ask stops the campaign and asks, and once
every stage has its result the campaign ends with them. A confirm stage alone runs its
A/B runs itself (`confirm.plan`).

Stage by stage (the seeds' dependency order):
  health   node perf on every node of the slot; degraded and unhealthy nodes are excluded
           with their evidence (the node perf sweep); the first healthy nodes the
           parallelism needs are frozen for the rest; fewer than it needs: stop and ask
  batch    model perf on the frozen nodes at the parallelism (its axes as overrides)
  flags    xla-tuning at the batch found, on the frozen nodes; a bounded search is a
           result (no recipe), not a stop
  confirm  a confirm campaign: baseline-deployed against batch + recipe, interleaved
With several parallelisms, node health runs once, then batch, flags and confirm for each
parallelism in turn (`stages.steps`).
"""

from __future__ import annotations

from sweepd.kinds.api import Finished, Plan, Stop, SweepContext
from sweepd.kinds.campaign import confirm
from sweepd.kinds.campaign.gather import CampaignFacts, Child
from sweepd.kinds.campaign.results import (
    candidate,
    excluded,
    frozen_nodes,
    healthy_nodes,
    summary,
    verdict,
)
from sweepd.kinds.campaign.rules import STAGE_STOPPED, TOO_FEW_NODES
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.stages import Step, ended, start, steps
from sweepd.store.states import SweepState
from sweepd.util.hostlists import collect_nodes


def _nodes(spec: CampaignSpec, step: Step, facts: CampaignFacts) -> list[str] | None:
    """The nodes a step runs on; None: too few healthy nodes for the campaign."""
    if step.stage == "health":
        return spec.node_list
    if step.stage == "network":
        nodes = healthy_nodes(spec, facts)
        return nodes if len(nodes) >= spec.job_nodes else None
    return frozen_nodes(spec, facts, step.par)


def _stopped(step: Step, child: Child, ctx: SweepContext[CampaignFacts]) -> Plan:
    rule = STAGE_STOPPED.of(str(child.id))
    if rule in ctx.acknowledged_stops:
        return []   # the person answered; the stage's sweep waits for its own word
    return Stop(f"stage {step.key} (sweep {child.id}) stopped and asks: {child.reason}. "
                f"Resume sweep {child.id} to go on with the stage, abort it to skip the "
                "stage, then resume this campaign; or abort the campaign", rule,
                evidence=f"sweep {child.id}: {child.reason}")


def plan(spec: CampaignSpec, ctx: SweepContext[CampaignFacts]) -> Plan:
    if spec.runs_itself:
        return confirm.plan(spec, ctx)
    facts = ctx.facts
    order = steps(spec)
    last: Step | None = None   # the step before, whose end the next start says
    for step in order:
        nodes = _nodes(spec, step, facts)
        if nodes is None:
            return _too_few(spec, facts, ctx)
        child = facts.children.get(step.key)
        if child is None and facts.spent_hours >= spec.budget_hours:
            return Finished(True, f"budget spent ({facts.spent_hours:.1f} h of "
                                  f"{spec.budget_hours:g} h) before stage {step.key}: the "
                                  f"campaign ends with what it has: {summary(spec, facts)}",
                            {**verdict(spec, facts), "budget_spent": True})
        if child is None and step.stage == "confirm" and step.par is not None \
                and not candidate(facts.cell(step.par)):
            # The stages before found nothing to change: baseline against itself proves
            # nothing, so nothing is run (the summary says so).
            continue
        if child is None:
            return start(spec, step, facts, nodes, first=not facts.children,
                         before=ended(spec, last, facts) if last else None)
        last = step
        if child.state in (SweepState.QUEUED, SweepState.RUNNING):
            return []
        if child.state == SweepState.AWAITING_DECISION:
            return _stopped(step, child, ctx)
        if child.state == SweepState.FAILED and step.stage in ("health", "network"):
            return Finished(False, f"campaign: node health failed (sweep {child.id}): "
                                   f"{child.reason}", verdict(spec, facts))
    return Finished(True, summary(spec, facts), verdict(spec, facts))


def _too_few(spec: CampaignSpec, facts: CampaignFacts, ctx: SweepContext[CampaignFacts]
             ) -> Plan:
    left = [n for n in spec.node_list if n not in excluded(spec, facts)]
    rule = TOO_FEW_NODES.id
    if rule in ctx.acknowledged_stops:
        return Finished(False, "campaign ended: too few healthy nodes", verdict(spec, facts))
    largest = max(spec.parallelisms, key=spec.nodes_of)
    return Stop(f"stage health: only {len(left)} healthy node(s) in the slot "
                f"({collect_nodes(left) or 'none'}); {largest} needs {spec.job_nodes}. Add "
                "nodes (a new campaign), or abort", rule, evidence="; ".join(f"{n}: {w}" for n, w in
                                                   excluded(spec, facts).items()))
