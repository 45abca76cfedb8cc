"""Model perf's rules: every id its planner records with a run, a stop or a verdict, what
each decides and the thresholds (`thresholds.py`) it reads. The planner names its rules
through these objects; tests/test_rule_registry.py holds the code and the tests to this
book and scripts/rules_doc.py writes it into docs/architecture.md."""

from __future__ import annotations

from sweepd.kinds.model_perf.thresholds import meanings
from sweepd.util.rulebook import Rule, RuleBook, Threshold

# Runs: the batch search's moves, one rule each (`search/choose.py` and `search/shapes.py`
# choose them; `search/__init__.py:next_probe` passes the rule on with the step). Each lists
# the thresholds its move reads: tests/test_model_perf_rule_reads.py scans the code.
FIRST_PROBE = Rule(
    "model_perf.first_probe",
    "nothing ran yet: start at start_fraction of the memory estimate's max (SKILL.md Step 3), "
    "where an earlier sweep says, or in the middle of the given values",
    ("start_fraction", "align_slack", "align_max"), where=("search.choose:first_probe",))
BELOW_FAILURE = Rule(
    "model_perf.below_failure",
    "every run failed and no compiled-memory line predicts: start_fraction of the lowest "
    "failure, halved once a second one fails",
    ("start_fraction", "align_slack", "align_max"), where=("search.choose:_below_failure",))
CLIMB = Rule(
    "model_perf.climb",
    "above the largest pass, nothing above it failed and no memory line says where the limit "
    "is: climb by the factor (SKILL.md: the second probe at 1.5x the first)",
    ("climb",), where=("search.choose:_climb_from",))
LARGEST_FIT = Rule(
    "model_perf.largest_fit",
    "the largest value the compiled-memory line predicts to fit (under the pool by "
    "memory_margin; after one OOM's one-run line, descent_aim of it)",
    ("descent_aim", "memory_margin", "oom_margin_gb"),
    where=("search.choose:_climb", "search.choose:_under_failure"))
LINE_TEST = Rule(
    "model_perf.line_test",
    "one above the largest pass, where a memory line that one run drew or a pass "
    "contradicts says nothing more fits: the run tests the line",
    ("memory_margin",), where=("search.choose:_climb", "search.choose:_over_line"))
BISECT = Rule(
    "model_perf.bisect",
    "toward a failure that says not where the limit is below it (no allocation size, an OOM "
    "the memory measured contradicts, a line a pass read over the pool, no line at all): "
    "the midpoint between it and the largest pass (or half of it)",
    ("align_slack", "align_max"), where=("search.choose:_bisect",))
SECANT = Rule(
    "model_perf.secant",
    "an open gap beside the best: a step from the best whose TGS the trend should tell "
    "apart from the noise, so the secant through the two bounds the rest of that side",
    ("tolerance", "secant_noise", "step_time_noise", "step_noise", "step_share",
     "align_slack", "align_noise", "flat"), where=("search.choose:_secant_step",))
BELOW_LOWEST = Rule(
    "model_perf.below_lowest",
    "nothing below the lowest pass bounds the bottom gap: a step down to bottom_step of it, "
    "whose secant settles that gap on a rising curve",
    ("tolerance", "secant_noise", "step_time_noise", "bottom_step", "align_slack",
     "align_max"), where=("search.choose:_below_lowest",))
MIDPOINT = Rule(
    "model_perf.midpoint",
    "a gap between two runs, away from the best, whose secants cannot settle it: its "
    "midpoint",
    ("tolerance", "secant_noise", "step_time_noise", "align_slack", "align_max"),
    where=("search.choose:_midpoint",))
TILE_MULTIPLE = Rule(
    "model_perf.tile_multiple",
    "runs at a batch multiple read beyond the noise above the batches between them (tile "
    "alignment): the multiples either side of the best run next",
    ("flat", "align_max"), where=("search.shapes:aligned_next",))
LADDER = Rule(
    "model_perf.ladder",
    "multi_peak: before stopping, halve below the lowest run, then bisect a wide gap below "
    "the best that a valley would open, whatever the secants say",
    ("ladder_step", "ladder_floor", "ladder_depth", "ladder_valley", "ladder_gap",
     "align_slack", "align_max", "tolerance", "secant_noise", "step_time_noise"),
    where=("search.shapes:_below_lowest", "search.shapes:_valley_gap"))
PRIOR_BEST = Rule(
    "model_perf.prior_best",
    "an earlier sweep's runs, scaled to this one's, are highest at a value not run here: "
    "it runs here",
    ("prior_drift", "prior_shape"), where=("search:_prior_best",))
CATEGORICAL = Rule(
    "model_perf.categorical",
    "a parameter with no order (a remat policy): every value is tried",
    where=("search:_categorical",))
REPEAT = Rule(
    "model_perf.repeat",
    "the search settled on single runs: the best, a rival within two runs' noise or an "
    "unrun value beside the best runs (again), so the verdict rests on the noise measured",
    ("noise", "flat", "quiet", "max_runs_of_a_value"),
    where=("search.repeat:repeat_top", "search.repeat:_quiet_repeat"))
NOISE_PROBE = Rule(
    "model_perf.noise_probe",
    "measured_noise: the runs' steps put the run-to-run noise quiet (a quarter of the prior "
    "or less) and no value ran twice: the leader runs again at once, before any decision "
    "rests on the steps' figure; decisions then use the larger of the steps' and the pair's "
    "figures (never under noise_limit), the prior until then and where the pair spreads "
    "wider than the steps said",
    ("quiet", "min_runs", "noise_probe_left", "noise_limit"),
    where=("search.repeat:noise_probe",))
# The search's moves: a run recorded under one of these is the batch search's own step.
SEARCH_MOVES = (FIRST_PROBE, BELOW_FAILURE, CLIMB, LARGEST_FIT, LINE_TEST, BISECT, SECANT,
                BELOW_LOWEST, MIDPOINT, TILE_MULTIPLE, LADDER, PRIOR_BEST, CATEGORICAL, REPEAT,
                NOISE_PROBE)
CONTRADICTION_RERUN = Rule(
    "model_perf.contradiction_rerun",
    "a failure below a pass, or at a batch the passes' compiled memory says fits, runs "
    "once more before it bounds the search",
    ("memory_margin",), where=("probes:rerun",))
SLOWDOWN_CHECK = Rule(
    "model_perf.slowdown_check",
    "the best runs again where later runs read close to it, to check the runs stayed "
    "comparable",
    ("slow_max", "flat", "noise"), where=("search.slowed:check_run",))
SLOWDOWN_CONFIRM = Rule(
    "model_perf.slowdown_confirm",
    "a value that read lower on its run again: the run before it runs again to confirm "
    "the nodes slowed",
    ("flat", "noise"), where=("search.slowed:confirm_run",))
TWO_PARAM_PROBE = Rule(
    "model_perf.two_param_probe",
    "the next (batch, second setting) pair of a two-parameter sweep: each setting's batch "
    "search (its memory line, its noise, an earlier policy's curve scaled to it) in turn",
    ("starves_above", "past_ref", "flat", "noise", "tolerance", "secant_noise",
     "step_time_noise", "memory_margin", "oom_margin_gb", "memory_agree",
     "memory_rounding_gb", "prior_drift", "prior_shape"),
    where=("two_param.grid:next_pair",))
# Stops.
BELOW_MINIMUM = Rule(
    "nodes.below_minimum",
    "fewer usable nodes than the spec's min_nodes: stop and ask, never shrink the search")
BUDGET_GAP = Rule(
    "model_perf.budget_gap",
    "max_runs ran out with a gap or a rival within the noise beside the best (at a noise "
    "above the prior, a rival the repeats did not yet tell apart): stop and ask for up to "
    "extra_runs more",
    ("max_runs", "extra_runs", "flat", "noise", "tolerance", "secant_noise",
     "step_time_noise"),
    where=("plan:runs_budget", "plan:gap_at_budget", "plan:rivals_at_budget",
           "plan_two:unfinished_at_budget"))
NODES_SLOWED = Rule(
    "model_perf.nodes_slowed",
    "a value read lower beyond two runs' noise, confirmed by one more run: the runs are "
    "not one curve; stop and ask",
    ("flat", "noise"))
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
    *SEARCH_MOVES, CONTRADICTION_RERUN, SLOWDOWN_CHECK, SLOWDOWN_CONFIRM, TWO_PARAM_PROBE,
    BELOW_MINIMUM, BUDGET_GAP, NODES_SLOWED, OPTIMUM, BEST_SO_FAR, NO_PASS,
), _thresholds())
