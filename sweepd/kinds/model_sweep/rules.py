"""Model sweep's rules: what its planner records with each run and stop, and the thresholds
they read (pointers to their one definition). tests/test_rule_registry.py holds the code to
this book; scripts/rules_doc.py writes it into docs/architecture.md."""

from __future__ import annotations

from sweepd.util.rulebook import Rule, RuleBook, Threshold

MATRIX = Rule("model_sweep.matrix", "each (model, node count, commit) cell of the matrix runs "
              "once")
FAIL_FAST = Rule("model_sweep.fail_fast", "models newly broken on a commit (passing on the "
                 "baseline): stop once fail_fast_models of them fail", ("fail_fast_models",))
ALL_FAIL = Rule("model_sweep.all_fail", "a commit's first jobs all fail alike across models, "
                "none passing: the commit is broken, stop (batch-sweep.SKILL.md Step 6)",
                ("all_fail_jobs", "all_fail_models"))

_PLAN = "sweepd.kinds.model_sweep.plan:"
_COMPARE = "sweepd.kinds.model_sweep.compare:"
BOOK = RuleBook("model_sweep", (MATRIX, FAIL_FAST, ALL_FAIL), (
    Threshold("fail_fast_models", _PLAN + "FAIL_FAST_MODELS",
              "models newly broken on a commit before the sweep stops"),
    Threshold("all_fail_jobs", _PLAN + "ALL_FAIL_JOBS",
              "failed first jobs of a commit, none passing, that stop it"),
    Threshold("all_fail_models", _PLAN + "ALL_FAIL_MODELS",
              "models those failed jobs must span"),
    Threshold("no_regression_pct", _COMPARE + "NO_REGRESSION_PCT",
              "the report: a change within this (%) is no regression"),
    Threshold("regression_pct", _COMPARE + "REGRESSION_PCT",
              "the report: a drop beyond this (%) is a flagged regression"),
    Threshold("max_history", "sweepd.kinds.model_sweep.kind:MAX_HISTORY",
              "earlier sweeps followed through compare_to"),
))
