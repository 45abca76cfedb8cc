"""The stop rules' numbers, the planner's other defaults and the spec's options on them, each
declared once here: the spec's `thresholds:` section is generated from the fields marked
`spec` (their bounds with them, `spec.Thresholds`), the spec's top-level `stop` and
`proposer` take their defaults from here, the planner's `Inputs` is this record with the
spec's cell added (a subclass), and the rule book (scripts/rules_doc.py writes it into the
docs) points at `THRESHOLDS`. Each field's `means` says what it decides; the defaults are
xla-tuning.SKILL.md's where it names one.

The search's own numbers (how far a result must move, how often a profile is re-run) stay
beside the rules that read them (`waves/wave_rules.py`, `waves/claims.py`, ...), each defined
once there under a name of its own; the rule book points at them, and each rule lists every
number its decision reads (tests/test_xla_thresholds.py reads the code to hold it to that).

A leaf: it imports nothing of the kind, so that every part may read it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Literal


class DriftRead(StrEnum):
    """How a claim reads the baseline beside it (`evidence/drift.py` reads each)."""

    MEAN = "mean"
    LINE = "line"
    TREND = "trend"


Stop = Literal["seed", "thorough"]
Proposer = Literal["rules", "tpe", "surrogate"]
# What each proposer other than the hand rules needs installed (the bench extra's).
PROPOSER_NEEDS = {"tpe": ("optuna", "optuna"), "surrogate": ("sklearn", "scikit-learn")}


def _d(value: Any, means: str, spec: dict[str, Any] | None = None) -> Any:
    """A field: its default, what it decides and, where the spec's `thresholds:` section
    sets it, that field's bounds (pydantic's `Field` keywords; {} for none)."""
    meta: dict[str, Any] = {"means": means}
    if spec is not None:
        meta["spec"] = spec
    return field(default=value, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class XlaThresholds:
    # The SKILL.md's three stop rules.
    win: float = _d(0.05, "stop rule 1: a confirmed recipe at least this much faster",
                    {"gt": 0, "le": 1})
    bounded_gain: float = _d(0.02, "stop rule 2: none beats this", {"ge": 0, "le": 1})
    bounded_count: int = _d(25, "stop rule 2: of at least this many profiles",
                            {"ge": 1, "le": 500})
    regress: float = _d(0.01, "no other config tag may lose more than this",
                        {"ge": 0, "le": 1})
    max_queue_hours: float = _d(8.0, "stop rule 3: the queue time (h)",
                                {"gt": 0, "le": 24 * 14})
    # The planner's.
    noise: float = _d(0.008, "relative std of one run: the prior of the cell's estimate",
                      {"gt": 0, "le": 0.5})
    wave_size: int = _d(8, "profiles a wave runs", {"ge": 1, "le": 50})
    max_flakes: int = _d(3, "flaky failures of a profile before it stands", {"ge": 1, "le": 10})
    max_flags: int = _d(3, "flags a recipe holds at most", {"ge": 1, "le": 6})
    report_runs: int = _d(2, "runs each of the proposal and the baseline its reported gain "
                             "is read from, made after it was decided (0: the runs that "
                             "confirmed it, as the SKILL.md; they also decided when to stop "
                             "and read high at a noisy cell)", {"ge": 0, "le": 10})
    focus: int = _d(99, "mechanisms (in evidence order) seeded in full before a winner may "
                        "end the sweep (99: all; a winner elsewhere would be missed)")
    # A caveat's, which decides nothing (`verdict/quiet.py`).
    quiet: float = _d(0.25, "the runs measured this fraction of `noise` or less: the verdict "
                            "says so, and the noise that would let the search read them")
    # The options that go past the SKILL.md's rules as written (on by default: measured).
    family_gaps: bool = _d(True, "before a bounded verdict, what of the catalog the search "
                                 "left unrun (mechanisms never seeded, numeric family values) "
                                 "runs in the queue time it would leave unused", {})
    bounded_question: bool = _d(True, "before a bounded verdict, a recipe reading above the "
                                      "bounded bar, not significantly, runs again beside the "
                                      "baseline until it clears the bar or falls to it", {})
    # Options measured on the sub-bar bench family, off by default (docs/benchmarks.md).
    on_leader: bool = _d(False, "at few runs, with a leader under the win bar run twice, a "
                                "one-value flag's first run goes on top of the leader", {})
    closing_pair: bool = _d(False, "at few runs, before the last runs confirm a leader under "
                                   "the win bar, the two best singles' stack runs once", {})
    # How a claim reads the baseline beside it on a cluster that may drift (`drift.py`); the
    # spec gives it as a string, hence not strict there. (`_d` is a `field`, which ruff cannot
    # tell where the annotation is an enum or an alias: RUF009 below.)
    drift: DriftRead = _d(  # noqa: RUF009
        DriftRead.TREND, "`trend`: the baseline's runs' trend over the "
                          "sweep, shrunk toward none; `line`: that trend unshrunk; `mean`: the "
                          "sweep's mean, as the SKILL.md", {"strict": False})
    # The spec's top-level options (`spec.XlaTuningSpec` reads their defaults here).
    stop: Stop = _d(  # noqa: RUF009
        "seed", "`seed`: the SKILL.md's stop rules as written; `thorough`: the winner rule "
                "waits for the search to plateau")
    proposer: Proposer = _d(  # noqa: RUF009
        "rules", "who proposes a wave's exploring runs: `rules`, the hand rules "
                 "(`search_steps.py`); `tpe`, Optuna's TPE; `surrogate`, a Bayesian linear "
                 "model (both need the bench extra; measured worse: docs/xla-tuning.md)")

    @property
    def max_queue_s(self) -> float:
        """Stop rule 3's queue time in seconds (the planner's clock)."""
        return self.max_queue_hours * 3600


THRESHOLDS = XlaThresholds()


def meanings() -> dict[str, str]:
    """Each field's name → what it means."""
    return {f.name: str(f.metadata["means"]) for f in fields(XlaThresholds)}


def spec_fields() -> dict[str, dict[str, Any]]:
    """The fields the spec's `thresholds:` section sets → their bounds (`spec.Thresholds`
    is generated from them)."""
    return {f.name: dict(f.metadata["spec"]) for f in fields(XlaThresholds)
            if "spec" in f.metadata}
