"""XLA / NCCL flag tuning (issue 14): the waves of xla-tuning.SKILL.md on a frozen nodelist."""

from __future__ import annotations

from sweepd.kinds.api import JobFacts, NodeFaults
from sweepd.kinds.registry import Budget, ClientHooks, Kind, Report, Stops
from sweepd.kinds.xla_tuning import hooks_client, report
from sweepd.kinds.xla_tuning import plan as adapter
from sweepd.kinds.xla_tuning.demo import DEMO
from sweepd.kinds.xla_tuning.evidence import jobfacts
from sweepd.kinds.xla_tuning.inventory import planner_facts
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.runs import budget, preflight
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec

# NodeFaults.STOP: TGS deltas of 1-3 % only compare on the same nodes; a node fault stops.
# Stops(on_config_error=False): an unknown flag fails every node the same way, yet it is
# one profile's result (dropped at once), not the sweep's.
KIND: Kind[XlaTuningSpec, XlaFacts] = Kind(
    "xla-tuning", XlaTuningSpec, adapter.plan, Report(report.markdown, report.rows),
    planner_facts.facts, node_faults=NodeFaults.STOP,
    stops=Stops(on_config_error=False, state=adapter.stop_state, files=report.stop_files),
    preflight=preflight.checks, plot=report.plot, demo=DEMO,
    # The spec's caps bound it: max_runs, the 8 h timebox, each job's own time limit.
    budget=Budget(runs=budget.most_runs, node_hours=budget.node_hours,
                  unbounded="no max_runs: its waves run until a verdict or its timebox"),
    client=ClientHooks(hooks_client.report_extras, hooks_client.run, hooks_client.REPORT_FLAGS),
    # Effective flags and env, unknown flags, the span from the log as it is read; the
    # HLO dump's evidence once the job ends: kept on the job, read by the gather.
    job_facts=JobFacts(jobfacts.fold, jobfacts.ended))
