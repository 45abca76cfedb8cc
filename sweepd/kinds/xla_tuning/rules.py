"""XLA tuning's rules: every id its planner records with a run (the wave that planned it),
a stop, a pre-flight check or a verdict, what each decides and the thresholds it reads.
A threshold here is a pointer to its one definition (the record `thresholds.THRESHOLDS`, which
the spec's and the planner's defaults read, or the search's module constants), read from
there. The planner names its rules through these objects;
tests/test_rule_registry.py holds the code and the tests to this book and
scripts/rules_doc.py writes it into docs/architecture.md.

A leaf but for the record (itself a leaf): it imports nothing else of the kind, so that every
module may name its rules here."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.thresholds import meanings
from sweepd.util.rulebook import Rule, RuleBook, Threshold


def _r(rule_id: str, decides: str, *thresholds: str) -> Rule:
    return Rule(rule_id, decides, tuple(thresholds))


# Waves 1 and 1.5: what the sweep starts from.
BASELINE = _r("wave1.baseline", "the env file as deployed runs on every config tag")
RESTORE_DEFAULT = _r("wave1.restore_default", "a flag the env file sets away from XLA's "
                     "default runs at the default on every tag")
EVIDENCE = _r("wave1_5.evidence", "one run with the profiler and the dumps: the evidence the "
              "catalog is chosen from")
NO_COLLECTIVES = _r("catalog.no_collectives", "a program with no collectives (one device, or "
                    "an evidence run whose HLO dump holds no collective op): the catalog's "
                    "collective-only families are not run")
# The search's waves.
CATALOG = _r("wave.catalog", "a catalog family's first value(s), the families the evidence "
             "points at first", "seed_focus", "seed_two_from", "wave_size",
       "focus", "stop")
NUMERIC_NEIGHBOUR = _r("wave.numeric_neighbour", "a numeric family that moved TGS: the "
                       "values beside its best", "live", "settled_family", "positive")
NUMERIC_EDGE = _r("wave.numeric_edge", "a numeric family's best at its edge with the trend "
                  "rising: the next value out", "edge_rise",
       "contender", "live", "win")
NUMERIC_ENDS = _r("wave.numeric_ends", "the flat numeric families of the mechanisms the "
                  "evidence points at: their ends", "pointed")
STACK = _r("wave.stack", "the leader plus a positive single: a stack", "positive",
           "stacks_per_wave", "max_flags")
CLOSING_STACK = _r("wave.closing_stack", "a stack reaching the win bar runs before the "
                   "leader's needs in a closing wave", "closing_stacks", "win",
       "few_runs", "max_queue_hours")
CLOSING_PAIR = _r("wave.closing_pair", "with the option `closing_pair`: at few runs, a "
                  "closing wave's leader under the win bar: the stack of the two best singles "
                  "runs once before its needs when predicted above it", "few_runs", "positive",
                  "win",
       "closing_pair", "max_flags", "max_queue_hours")
ON_LEADER = _r("wave.on_leader", "with the option `on_leader`: at few runs, a leader "
               "under the win bar run twice: a one-value flag's first run is on top of it, "
               "not alone", "few_runs", "win",
       "max_flags", "max_queue_hours", "on_leader")
TPE = _r("wave.tpe", "with the proposer option `tpe` (not the default): Optuna's TPE, refitted "
         "to the board at each plan, proposes a wave's exploring runs", "wave_size",
       "max_flags", "tpe_slots", "tpe_failed", "tpe_asks")
SURROGATE = _r("wave.surrogate", "with the proposer option `surrogate` (not the default): a "
               "Bayesian linear model of the board proposes a wave's exploring runs, best upper "
               "bound first", "wave_size",
       "max_flags", "surrogate_kappa", "surrogate_pool", "surrogate_family_sd",
       "surrogate_value_sd", "surrogate_wave")
POLISH_VALUE = _r("wave.polish_value", "endgame: a neighbour value of one of the leader's "
                  "flags", "polish",
       "max_flags", "positive")
POLISH_ADD = _r("wave.polish_add", "endgame: a flag added to the leader", "polish",
       "max_flags", "positive")
PAIR_FILL = _r("wave.pair_fill", "the catalog spent short of the bounded count: pairs of the "
               "best singles", "pair_singles", "bounded_count")
FAMILY_GAP = _r("wave.family_gap", "before a bounded verdict, what of the catalog the search "
                "left unrun runs in the queue time left", "family_gaps", "spare_runs")
FILL_ENDS = _r("wave.fill_ends", "before a bounded verdict, the ends of numeric families not "
               "yet run", "spare_runs",
       "bounded_count", "live")
OOM_BESIDE_MEMORY = _r("wave.oom_beside_memory", "a profile that ran out of memory runs "
                       "beside more memory",
       "max_flags")
PIPELINE_SHAPE = _r("wave5.pipeline_shape", "a pipeline-parallel cell: the pipeline's shape "
                    "flags",
       "max_flags")
CROSS_TAG = _r("wave6.cross_tag", "the best recipe runs on every other config tag", "regress",
       "drift", "wave6_n", "z_one")
BESIDE_BASELINE = _r("wave6.beside_baseline", "the baseline beside the best on another tag",
                     "wave6_n",
       "drift", "regress", "z_one")
RECHECK = _r("wave6.recheck", "another tag's reading of the best runs again", "wave6_n",
       "drift", "regress", "z_one")
RECHECK_BASELINE = _r("wave6.recheck_baseline", "another tag's baseline runs again", "wave6_n",
       "drift", "regress", "z_one")
# Noise and claims.
RERUN = _r("noise.rerun", "a single run close to the best runs again; at few runs also a "
           "numeric family's value read within 2 se of the family's best", "contender", "max_n",
           "family_rival", "few_runs",
       "bounded_gain", "confirm_base_n", "max_flags", "max_queue_hours", "near_bar_n",
       "near_base_n", "positive", "win")
CONFIRM = _r("noise.confirm", "a recipe's fresh runs: its gain confirmed or not",
             "min_fresh", "win_margin", "win", "confirm_base_n", "z_one",
       "bounded_gain", "contender", "family_rival", "few_runs", "max_flags", "max_n",
       "max_queue_hours", "near_bar_n", "near_base_n", "near_fresh", "part_n", "part_z",
       "part_z_drop", "part_z_keep", "pool_gate", "positive", "z_clear")
NEAR_LINE = _r("noise.near_line", "a recipe whose fresh mean sits near the win bar runs again "
               "to clear it at 99 %", "near_fresh", "near_bar_n", "z_clear", "z_near",
       "confirm_base_n", "min_fresh", "near_base_n", "part_n", "part_z", "part_z_drop",
       "part_z_keep", "pool_gate", "win", "win_margin", "z_one")
NEAR_LINE_BASELINE = _r("noise.near_line_baseline", "the baseline beside a claim near the "
                        "line", "near_base_n",
       "confirm_base_n", "min_fresh", "near_fresh", "part_n", "part_z", "part_z_drop",
       "part_z_keep", "pool_gate", "win", "win_margin", "z_clear", "z_one")
RERUN_BASELINE = _r("noise.rerun_baseline", "the baseline runs again beside a claim or a "
                    "bounded question", "confirm_base_n", "bounded_base_n",
       "base_floor", "bounded_gain", "bounded_question", "contender", "family_rival",
       "few_runs", "fresh_n", "max_flags", "max_n", "max_queue_hours", "min_fresh",
       "near_bar_n", "near_base_n", "near_fresh", "part_n", "part_z", "part_z_drop",
       "part_z_keep", "pool_gate", "positive", "win", "win_margin", "z_clear", "z_one")
BESIDE_CLAIM = _r("noise.beside_claim", "the baseline run beside a claim's runs",
       "drift")
PART_CHECK = _r("verdict.part_check", "each flag of a winning recipe is checked for its "
                "part in the gain", "part_z", "part_z_keep", "part_z_drop", "part_n",
                "pool_gate",
       "confirm_base_n", "min_fresh", "near_base_n", "near_fresh", "win", "win_margin",
       "z_clear", "z_one")
QUIET = _r("verdict.quiet", "at any verdict, the runs measured `quiet` of `noise` or less "
           "(their steps, their repeats): the verdict says so, with the noise that would let "
           "the search read them and the gains clear of it (a caveat: decides nothing)",
           "quiet", "noise", "quiet_readings", "quiet_steps", "quiet_margin", "quiet_floor",
       "bounded_gain", "z95", "prior_df", "quiet_shown", "quiet_step")
REPORT = _r("claim.report", "runs of the proposal and the baseline made after it was "
            "decided, which its reported gain is read from", "report_runs",
       "max_queue_hours", "win")
BOUNDED_STACK = _r("bounded.stack", "before a bounded verdict, the best singles stacked once",
                   "bounded_gain",
       "base_floor", "bounded_question")
# Failures.
NOT_APPLIED_RETRY = _r("failure.not_applied_retry", "a profile the job did not apply runs "
                       "again",
       "max_flakes")
FLAKE_RETRY = _r("failure.flake_retry", "a flaky failure runs again", "max_flakes")
NOT_APPLIED = _r("xla.not_applied", "profiles not applied, all the same way: stop and ask",
                 "not_applied_limit", "max_line")
# The checks before each wave and at submission.
SLOT_UNRESOLVED = _r("preflight.slot_unresolved", "the cluster slot names no nodes yet: stop")
NODES_FROZEN = _r("nodes.frozen", "a node of the frozen nodelist out of use: stop, never "
                  "excluded or substituted")
PREFLIGHT_NODES = _r("preflight.nodes", "the pinned nodes' states at submission")
PREFLIGHT_OTHER_USERS = _r("preflight.other_users", "other users' jobs on the nodes at "
                           "submission", "shown_jobs")
PREFLIGHT_TRAIN_ENV = _r("preflight.train_env", "train_env.sh holds no other sweep's arms")
PREFLIGHT_MODEL = _r("preflight.model_shape", "a model sweepd has no shape for runs with the "
                     "shape its overrides give; what is then unavailable is said")
# Verdicts (the stop rules).
WINNER = _r("stop.winner", "stop rule 1: a confirmed recipe at least win faster, no tag "
            "regressing more than regress", "win", "regress", "min_fresh", "win_margin", "stop",
            "focus",
       "bounded_count", "bounded_gain", "bounded_question", "confirm_base_n", "drift",
       "fresh_n", "max_flags", "max_queue_hours", "near_base_n", "near_fresh", "part_n",
       "part_z", "part_z_drop", "part_z_keep", "pool_gate", "report_runs",
       "selecting_overstate", "wave6_n", "z_clear", "z_near", "z_one", "z95")
BOUNDED = _r("stop.bounded", "stop rule 2: at least bounded_count profiles, none above "
             "bounded_gain", "bounded_gain", "bounded_count", "bounded_question", "fresh_n",
             "bounded_base_n", "base_floor",
       "confirm_base_n", "drift", "family_gaps", "max_flags", "max_queue_hours",
       "min_fresh", "near_base_n", "near_fresh", "part_n", "part_z", "part_z_drop",
       "part_z_keep", "pool_gate", "regress", "report_runs", "selecting_overstate",
       "spare_runs", "wave6_n", "win", "win_margin", "z_clear", "z_near", "z_one", "z95")
CATALOG_EXHAUSTED = _r("stop.catalog_exhausted", "the catalog ran out before either rule "
                       "held", "bounded_count",
       "bounded_gain", "bounded_question", "confirm_base_n", "drift", "family_gaps",
       "fresh_n", "max_flags", "max_queue_hours", "min_fresh", "near_base_n", "near_fresh",
       "part_n", "part_z", "part_z_drop", "part_z_keep", "pool_gate", "regress",
       "report_runs", "selecting_overstate", "spare_runs", "stop", "wave6_n", "wave_size",
       "win", "win_margin", "z_clear", "z_near", "z_one", "z95")
TIMEBOX = _r("stop.timebox", "stop rule 3: the queue time ran out", "max_queue_hours",
             "selecting_overstate",
       "base_floor", "bounded_count", "bounded_gain", "bounded_question", "confirm_base_n",
       "drift", "fresh_n", "max_flags", "min_fresh", "near_base_n", "near_fresh", "part_n",
       "part_z", "part_z_drop", "part_z_keep", "pool_gate", "regress", "report_runs",
       "wave6_n", "win", "win_margin", "z_clear", "z_near", "z_one", "z95")
MAX_RUNS = _r("stop.max_runs", "the spec's run budget ran out",
       "base_floor", "bounded_count", "bounded_gain", "bounded_question", "confirm_base_n",
       "drift", "fresh_n", "max_flags", "max_queue_hours", "min_fresh", "near_base_n",
       "near_fresh", "part_n", "part_z", "part_z_drop", "part_z_keep", "pool_gate",
       "regress", "report_runs", "selecting_overstate", "wave6_n", "win", "win_margin",
       "z_clear", "z_near", "z_one", "z95")

# Where a rule decides, for a rule some function only cites (in a note, a caveat, a label)
# or compares a run's rule with: its deciding functions (`module:function` in the kind). The
# rest decide where they are named. tests/test_xla_thresholds.py reads the numbers each
# rule's decision reads off these functions and the calls they make: all are in its list.
DECIDED_IN: dict[str, tuple[str, ...]] = {
    NO_COLLECTIVES.id: ("waves.no_collectives:without_collectives",),
    EVIDENCE.id: ("search:_wave1",),
    CATALOG.id: ("waves.search_steps:SearchSteps.seeds",),
    CONFIRM.id: ("verdict.stops:needs_for", "waves.search_steps:SearchSteps.confirmations"),
    NEAR_LINE.id: ("verdict.stops:needs_for",),
    REPORT.id: ("verdict.stops:_block", "verdict.closing_block:block_first"),
    OOM_BESIDE_MEMORY.id: ("waves.family_gaps:beside_more_memory",),
}

_WAVE = "sweepd.kinds.xla_tuning.waves.wave_rules:"
_CLAIMS = "sweepd.kinds.xla_tuning.waves.claims:"
_BOUNDED = "sweepd.kinds.xla_tuning.verdict.bounded_question:"
_PARTS = "sweepd.kinds.xla_tuning.waves.parts:"


def _t(name: str, where: str, means: str) -> Threshold:
    return Threshold(name, where, means)


def _record() -> tuple[Threshold, ...]:
    where = "sweepd.kinds.xla_tuning.thresholds:THRESHOLDS."
    return tuple(_t(name, where + name, means) for name, means in meanings().items())


THRESHOLDS = (
    # The record (`thresholds.py`): the spec's and the planner's defaults.
    *_record(),
    # The search's (wave_rules.py).
    _t("live", _WAVE + "LIVE", "a family whose first value moved TGS this much is searched"),
    _t("positive", _WAVE + "POSITIVE", "a single this much faster may join a stack"),
    _t("max_n", _WAVE + "MAX_N", "runs of one profile before its mean is taken as it is"),
    _t("confirm_base_n", _WAVE + "CONFIRM_BASE_N", "baseline runs on the primary tag behind a "
       "confirmation"),
    _t("near_base_n", _WAVE + "NEAR_BASE_N", "baseline runs behind a claim near the line"),
    _t("near_bar_n", _WAVE + "NEAR_BAR_N", "runs of a recipe within 2 se of the win bar"),
    _t("seed_focus", _WAVE + "SEED_FOCUS", "families the evidence points at seeded first"),
    _t("pointed", _WAVE + "POINTED", "mechanisms whose flat numeric families get their ends"),
    _t("stacks_per_wave", _WAVE + "STACKS_PER_WAVE", "stacks a wave runs"),
    _t("closing_stacks", _WAVE + "CLOSING_STACKS", "stacks a closing wave runs first"),
    _t("seed_two_from", _WAVE + "SEED_TWO_FROM", "families this long get two first values"),
    _t("contender", _WAVE + "CONTENDER", "a single run this close to the best is re-run"),
    _t("few_runs", _WAVE + "FEW_RUNS", "fewer runs than this fit in the timebox: few runs "
       "(contenders that cannot reach the win bar are not re-run; family rivals are)"),
    _t("family_rival", _WAVE + "FAMILY_RIVAL", "at few runs, a numeric family's value read "
       "once within 2 se of its best value is re-run (on/off)"),
    _t("selecting_overstate", "sweepd.kinds.xla_tuning.verdict.verdict_claim:"
       "SELECTING_OVERSTATE", "how far a gain read on the runs that selected it overstates "
       "the truth on the bench's sub-bar cells (said with such a figure)"),
    _t("settled_family", _WAVE + "SETTLED_FAMILY", "a family measured at this many values, "
       "its best under twice positive, gets no more neighbours"),
    _t("edge_rise", _WAVE + "EDGE_RISE", "an edge value this far above its neighbour: rising"),
    _t("polish", _WAVE + "POLISH", "endgame runs per wave"),
    _t("pair_singles", _WAVE + "PAIR_SINGLES", "best singles paired when the catalog is spent"),
    # Claims (claims.py).
    _t("win_margin", _CLAIMS + "WIN_MARGIN", "the one-sided lower bound's margin over the bar"),
    _t("min_fresh", _CLAIMS + "MIN_FRESH", "fresh runs before a gain counts as confirmed"),
    _t("z_clear", _CLAIMS + "Z_CLEAR", "99 %: a claim near the line clears at this z"),
    _t("near_fresh", _CLAIMS + "NEAR_FRESH", "fresh runs behind a claim near the line"),
    _t("z_near", _CLAIMS + "Z_NEAR", "the z a claim near the line is read at"),
    _t("wave6_n", _CLAIMS + "WAVE6_N", "runs of another tag's reading"),
    _t("z_one", "sweepd.kinds.xla_tuning.evidence.board:Z_ONE", "one-sided 95 %"),
    # The bounded question (bounded_question.py).
    _t("fresh_n", _BOUNDED + "FRESH_N", "fresh runs of a recipe before 'not shown above' "
       "is taken"),
    _t("bounded_base_n", _BOUNDED + "BOUNDED_BASE_N", "baseline runs beside a bounded question"),
    _t("base_floor", _BOUNDED + "BASE_FLOOR", "baseline runs below any bounded verdict"),
    # A winner's parts (parts.py).
    _t("part_z", _PARTS + "PART_Z", "a flag's part in the gain is read at this z"),
    _t("part_z_keep", _PARTS + "PART_Z_KEEP", "z above which a flag is kept"),
    _t("part_z_drop", _PARTS + "PART_Z_DROP", "z below which a flag is dropped"),
    _t("part_n", _PARTS + "PART_N", "runs of a part check"),
    _t("pool_gate", _PARTS + "POOL_GATE", "a context whose gap disagrees by more se is not "
       "pooled"),
    # What the runs measured of the noise (the QUIET caveat).
    _t("quiet_readings", "sweepd.kinds.xla_tuning.evidence.measured_noise:READINGS",
       "runs (their steps) or degrees of freedom (their repeats) before a reading counts"),
    _t("quiet_steps", "sweepd.kinds.xla_tuning.evidence.measured_noise:STEADY_STEPS",
       "steady steps a run's own noise is read from, at least"),
    _t("quiet_margin", "sweepd.kinds.xla_tuning.verdict.quiet:SUGGEST_MARGIN",
       "the noise suggested is this many times what the runs measured"),
    _t("quiet_floor", "sweepd.kinds.xla_tuning.verdict.quiet:SUGGEST_FLOOR",
       "the least noise suggested (the chip's runs agreed within 0.03 % over a day)"),
    # Others.
    _t("spare_runs", "sweepd.kinds.xla_tuning.waves.family_gaps:SPARE_RUNS",
       "runs left unused before a bounded verdict that fill the catalog's gaps"),
    _t("not_applied_limit", "sweepd.kinds.xla_tuning.runs.plan_checks:NOT_APPLIED_LIMIT",
       "profiles not applied alike before the sweep stops"),
    _t("shown_jobs", "sweepd.kinds.xla_tuning.runs.preflight:SHOWN_JOBS",
       "other users' jobs the pre-flight lists"),
    _t("z95", "sweepd.kinds.xla_tuning.evidence.board:Z95",
       "two-sided 95 %: a verdict's gain interval (widened to Student's t)"),
    _t("prior_df", "sweepd.kinds.xla_tuning.evidence.board_build:PRIOR_DF",
       "the prior noise weighs as much as this many degrees of freedom of repeats"),
    _t("quiet_shown", "sweepd.kinds.xla_tuning.verdict.quiet:SHOWN",
       "gains clear of the measured noise the quiet caveat names, the best first"),
    _t("quiet_step", "sweepd.kinds.xla_tuning.verdict.quiet:SUGGEST_STEP",
       "the noise suggested is rounded up to this"),
    _t("surrogate_kappa", "sweepd.kinds.xla_tuning.waves.surrogate_proposals:KAPPA",
       "the surrogate's upper bound: mean plus this many sd"),
    _t("surrogate_pool", "sweepd.kinds.xla_tuning.waves.surrogate_proposals:POOL",
       "families, best upper bound first, whose recipes the surrogate ranks"),
    _t("surrogate_family_sd", "sweepd.kinds.xla_tuning.waves.surrogate_proposals:FAMILY_SD",
       "the surrogate's prior sd (log TGS) of setting a flag family at all"),
    _t("surrogate_value_sd", "sweepd.kinds.xla_tuning.waves.surrogate_proposals:VALUE_SD",
       "the surrogate's prior sd of one value on top of its family"),
    _t("surrogate_wave", "sweepd.kinds.xla_tuning.waves.surrogate_proposals:WAVE",
       "exploring runs the surrogate proposes a wave"),
    _t("tpe_slots", "sweepd.kinds.xla_tuning.waves.tpe_proposals:SLOTS",
       "flag slots of a recipe TPE proposes"),
    _t("tpe_failed", "sweepd.kinds.xla_tuning.waves.tpe_proposals:FAILED",
       "the value TPE is told for a recipe that did not run (OOM, unknown flag)"),
    _t("tpe_asks", "sweepd.kinds.xla_tuning.waves.tpe_proposals:ASKS",
       "suggestions asked per proposal wanted before TPE gives up on new recipes"),
    _t("max_line", "sweepd.kinds.xla_tuning.evidence.logread:_MAX_LINE",
       "a log line is read up to this many characters (no quadratic work on hostile logs)"),
)

BOOK = RuleBook("xla_tuning", (
    BASELINE, RESTORE_DEFAULT, EVIDENCE, NO_COLLECTIVES, CATALOG, NUMERIC_NEIGHBOUR,
    NUMERIC_EDGE, NUMERIC_ENDS,
    STACK, CLOSING_STACK, CLOSING_PAIR, ON_LEADER, TPE, SURROGATE, POLISH_VALUE, POLISH_ADD,
    PAIR_FILL, FAMILY_GAP, FILL_ENDS,
    OOM_BESIDE_MEMORY, PIPELINE_SHAPE, CROSS_TAG, BESIDE_BASELINE, RECHECK, RECHECK_BASELINE,
    RERUN, CONFIRM, NEAR_LINE, NEAR_LINE_BASELINE, RERUN_BASELINE, BESIDE_CLAIM, PART_CHECK,
    QUIET, REPORT, BOUNDED_STACK, NOT_APPLIED_RETRY, FLAKE_RETRY, NOT_APPLIED, SLOT_UNRESOLVED,
    NODES_FROZEN, PREFLIGHT_NODES, PREFLIGHT_OTHER_USERS, PREFLIGHT_TRAIN_ENV, PREFLIGHT_MODEL,
    WINNER, BOUNDED,
    CATALOG_EXHAUSTED, TIMEBOX, MAX_RUNS,
), THRESHOLDS)
