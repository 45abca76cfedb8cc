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
    """At most `max_runs` (and the extra runs `extend_budget` allows), and no more than the
    values given unless a value may run again (`measure_noise`, `check_slowdown`)."""
    values = spec.get("values")
    cap = int(spec.get("max_runs", THRESHOLDS.max_runs))
    if spec.get("extend_budget"):
        cap += THRESHOLDS.extra_runs
    again = bool(spec.get("measure_noise") or spec.get("check_slowdown"))
    return min(cap, len(values)) if isinstance(values, list) and not again else cap


KIND = Kind(exports.NAME, ModelPerfSpec, plan_two.plan, Report(report.markdown, report.rows),
            gather, budget=Budget(runs=most_runs), plot=report.plot, demo=DEMO,
            client=ClientHooks(report_action=hooks.apply, report_flags=hooks.REPORT_FLAGS),
            job_facts=JobFacts(jobfacts.lines, jobfacts.ended))
