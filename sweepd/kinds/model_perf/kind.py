"""Model perf sweep: the batch size (or other parameter) with the highest steady TGS."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweepd.kinds.api import JobFacts
from sweepd.kinds.model_perf import exports, hooks, jobfacts, plan_two, report
from sweepd.kinds.model_perf.demo import DEMO
from sweepd.kinds.model_perf.gather import gather
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.kinds.registry import Budget, ClientHooks, Kind, Report


def most_runs(spec: Mapping[str, Any]) -> int:
    """At most `max_runs`, and no more than the values given."""
    values = spec.get("values")
    cap = int(spec.get("max_runs", THRESHOLDS.max_runs))
    return min(cap, len(values)) if isinstance(values, list) else cap


KIND = Kind(exports.NAME, ModelPerfSpec, plan_two.plan, Report(report.markdown, report.rows),
            gather, budget=Budget(runs=most_runs), plot=report.plot, demo=DEMO,
            client=ClientHooks(report_action=hooks.apply, report_flags=hooks.REPORT_FLAGS),
            job_facts=JobFacts(jobfacts.lines, jobfacts.ended))
