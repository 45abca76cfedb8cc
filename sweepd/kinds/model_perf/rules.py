"""Model perf's rules: every id its planner records with a run, a stop or a verdict, what
each decides and the thresholds (`thresholds.py`) it reads. The planner names its rules
through these objects; tests/test_rule_registry.py holds the code and the tests to this
book and scripts/rules_doc.py writes it into docs/architecture.md."""

from __future__ import annotations

from sweepd.kinds.model_perf.thresholds import meanings
from sweepd.util.rulebook import Rule, RuleBook, Threshold

# Runs.
UPPER_BOUND_PROBE = Rule(
    "model_perf.upper_bound_probe",
    "the next value to run: the first probe from the memory estimate, the climb, a gap the "
    "secants beside it cannot settle, or a step from the best",
    ("start_fraction", "climb", "max_batch", "tolerance", "step_noise", "step_share",
     "bottom_step", "descent_aim", "secant_noise", "step_time_noise", "align_slack",
     "align_max", "align_noise", "ladder_step", "ladder_floor", "ladder_depth",
     "ladder_valley", "ladder_gap", "memory_margin", "oom_margin_gb", "flat",
     "max_runs_of_a_value"))
CONTRADICTION_RERUN = Rule(
    "model_perf.contradiction_rerun",
    "a failure below a pass, or at a batch the passes' compiled memory says fits, runs "
    "once more before it bounds the search",
    ("memory_margin",))
SLOWDOWN_CHECK = Rule(
    "model_perf.slowdown_check",
    "the best runs again where later runs read close to it, to check the runs stayed "
    "comparable",
    ("slow_max", "flat"))
SLOWDOWN_CONFIRM = Rule(
    "model_perf.slowdown_confirm",
    "a value that read lower on its run again: the run before it runs again to confirm "
    "the nodes slowed",
    ("flat",))
TWO_PARAM_PROBE = Rule(
    "model_perf.two_param_probe",
    "the next (batch, second setting) pair of a two-parameter sweep",
    ("starves_above", "past_ref", "flat"))
# Stops.
BELOW_MINIMUM = Rule(
    "nodes.below_minimum",
    "fewer usable nodes than the spec's min_nodes: stop and ask, never shrink the search")
BUDGET_GAP = Rule(
    "model_perf.budget_gap",
    "max_runs ran out with a gap or a rival within the noise beside the best: stop and ask "
    "for up to extra_runs more",
    ("max_runs", "extra_runs", "flat"))
NODES_SLOWED = Rule(
    "model_perf.nodes_slowed",
    "a value read lower beyond two runs' noise, confirmed by one more run: the runs are "
    "not one curve; stop and ask",
    ("flat",))
# Verdicts (`Finished.rule`).
OPTIMUM = Rule(
    "model_perf.optimum",
    "the search settled: the best value (the pair, with a second knob) is the optimum",
    ("tolerance", "noise", "quiet", "prior_drift", "prior_shape", "memory_agree",
     "memory_rounding_gb", "node_variance"))
BEST_SO_FAR = Rule(
    "model_perf.best_so_far",
    "the budget ran out, or a slowdown a person resumed past, before the search settled: "
    "the best so far, with what was left open",
    ("max_runs", "extra_runs"))
NO_PASS = Rule(
    "model_perf.no_pass",
    "no value ran successfully: the sweep fails with no result")


def _thresholds() -> tuple[Threshold, ...]:
    where = "sweepd.kinds.model_perf.thresholds:THRESHOLDS."
    return tuple(Threshold(name, where + name, means) for name, means in meanings().items())


BOOK = RuleBook("model_perf", (
    UPPER_BOUND_PROBE, CONTRADICTION_RERUN, SLOWDOWN_CHECK, SLOWDOWN_CONFIRM, TWO_PARAM_PROBE,
    BELOW_MINIMUM, BUDGET_GAP, NODES_SLOWED, OPTIMUM, BEST_SO_FAR, NO_PASS,
), _thresholds())
