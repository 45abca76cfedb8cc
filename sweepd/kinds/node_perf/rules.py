"""Node perf's rules: what its planner records with each run, and the bands its verdict
reads (pointers to their one definition). tests/test_rule_registry.py holds the code to
this book; scripts/rules_doc.py writes it into docs/architecture.md."""

from __future__ import annotations

from sweepd.util.rulebook import Rule, RuleBook, Threshold

BASELINE = Rule("node_perf.baseline", "every node runs the model alone once, all in parallel",
                ("min_for_median",), where=("plan:baseline_runs",))
CONFIRM = Rule("node_perf.confirm", "a node outside the healthy band runs again before it is "
               "called marginal or degraded", ("healthy_band", "degraded_band"),
               where=("plan:confirm_runs",))

_PLAN = "sweepd.kinds.node_perf.plan:"
BOOK = RuleBook("node_perf", (BASELINE, CONFIRM), (
    Threshold("healthy_band", _PLAN + "HEALTHY_BAND",
              "within this of the median (faster is fine too): healthy"),
    Threshold("degraded_band", _PLAN + "DEGRADED_BAND", "this far or more below the median: "
              "degraded"),
    Threshold("min_for_median", "sweepd.kinds.node_perf.spec:MIN_FOR_MEDIAN",
              "pinned nodes needed for a median without a reference TGS"),
))
