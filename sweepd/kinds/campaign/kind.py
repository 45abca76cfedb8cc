"""Campaign (issue 25): node health -> batch -> XLA flags -> confirm in one spec, each stage
a normal sweep of its own kind, chained through their typed results."""

from __future__ import annotations

from sweepd.kinds.api import NodeFaults
from sweepd.kinds.campaign import budget, hooks, plan, preflight, report, stop
from sweepd.kinds.campaign.demo import DEMO
from sweepd.kinds.campaign.gather import NAME, CampaignFacts, gather
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.registry import Budget, ClientHooks, Kind, Report, Stops

# NodeFaults.STOP: a confirm stage compares candidate and baseline on the same nodes only;
# a node fault there stops it for a person (the chain itself runs no job).
KIND: Kind[CampaignSpec, CampaignFacts] = Kind(
    NAME, CampaignSpec, plan.plan, Report(report.markdown, report.rows), gather,
    node_faults=NodeFaults.STOP, plot=report.plot, demo=DEMO,
    stops=Stops(state=stop.stop_state), preflight=preflight.checks,
    budget=Budget(node_hours=budget.node_hours, unbounded=budget.UNBOUNDED),
    client=ClientHooks(hooks.report_extras, hooks.run, hooks.REPORT_FLAGS))
