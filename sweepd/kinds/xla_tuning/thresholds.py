"""The stop rules' numbers and the planner's other defaults, in one record: the spec's
`Thresholds` defaults, the planner's `Inputs` defaults, the simulated cluster's stop-rule
spans and the rule book (scripts/rules_doc.py writes it into the docs) all read
`THRESHOLDS`, never a copy (tests/test_xla_thresholds.py holds them to it). Each field's
`means` says what it decides; the defaults are xla-tuning.SKILL.md's where it names one.

The search's own numbers (how far a result must move, how often a profile is re-run) stay
beside the rules that read them (`waves/wave_rules.py`, `waves/claims.py`, ...), each defined
once there; the rule book points at them.

A leaf: it imports nothing of the kind, so that every part may read it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

Stop = Literal["seed", "thorough"]


def _d(value: Any, means: str) -> Any:
    return field(default=value, metadata={"means": means})


@dataclass(frozen=True)
class XlaThresholds:
    # The SKILL.md's three stop rules.
    win: float = _d(0.05, "stop rule 1: a confirmed recipe at least this much faster")
    bounded_gain: float = _d(0.02, "stop rule 2: none beats this")
    bounded_count: int = _d(25, "stop rule 2: of at least this many profiles")
    regress: float = _d(0.01, "no other config tag may lose more than this")
    max_queue_hours: float = _d(8.0, "stop rule 3: the queue time (h)")
    # The planner's.
    noise: float = _d(0.008, "relative std of one run: the prior of the cell's estimate")
    wave_size: int = _d(8, "profiles a wave runs")
    max_flakes: int = _d(3, "flaky failures of a profile before it stands")
    max_flags: int = _d(3, "flags a recipe holds at most")
    report_runs: int = _d(2, "runs each of the proposal and the baseline its reported gain "
                             "is read from (0: the runs that confirmed it, as the SKILL.md)")
    focus: int = _d(99, "mechanisms (in evidence order) seeded in full before a winner may "
                        "end the sweep (99: all; a winner elsewhere would be missed)")
    # A caveat's, which decides nothing (`verdict/quiet.py`).
    quiet: float = _d(0.25, "the runs measured this fraction of `noise` or less: the verdict "
                            "says so, and the noise that would let the search read them")
    # The options that go past the SKILL.md's rules as written (on by default: measured).
    family_gaps: bool = _d(True, "before a bounded verdict, what of the catalog the search "
                                 "left unrun runs in the queue time it would leave unused")
    bounded_question: bool = _d(True, "before a bounded verdict, a recipe reading above the "
                                      "bounded bar, not significantly, runs again")
    # Options measured on the sub-bar bench family, off by default (docs/benchmarks.md).
    on_leader: bool = _d(False, "at few runs, with a leader under the win bar run twice, a "
                                "one-value flag's first run goes on top of the leader")
    closing_pair: bool = _d(False, "at few runs, before the last runs confirm a leader under "
                                   "the win bar, the two best singles' stack runs once")
    stop: Literal["seed", "thorough"] = _d(
        "seed", "`seed`: the SKILL.md's stop rules as written; `thorough`: the winner rule "
                "waits for the search to plateau")

    @property
    def max_queue_s(self) -> float:
        """Stop rule 3's queue time in seconds (the planner's clock)."""
        return self.max_queue_hours * 3600


THRESHOLDS = XlaThresholds()


def meanings() -> dict[str, str]:
    """Each field's name → what it means."""
    return {f.name: str(f.metadata["means"]) for f in fields(XlaThresholds)}
