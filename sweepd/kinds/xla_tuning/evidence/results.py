"""The results so far as the planner keeps them: a run's `Result` (its `Outcome` and its role:
a search run, a claim run or a report run), and per profile and tag an `Entry` of its samples
and its `Fate`. The reserved profile names are here too.

Honest: a profile's first run is the one that selected it (a screening run, kept for
ranking); a claim reads the runs after it (`Entry.claimed`), and the runs made to measure a
claim are left out of what ranks recipes (`Entry.ranked`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from sweepd.kinds.xla_tuning import rules as rule_book

BASELINE = "baseline"
RESTORE = "restore_default"
EVIDENCE = "evidence"
# The rules of the runs made to measure a recipe's claim once it was put forward: its
# gain is read from these alone, and nothing that names or keeps it reads them.
CLAIM_RULES = frozenset({rule_book.CONFIRM.id, rule_book.NEAR_LINE.id})
CLAIM = rule_book.CONFIRM.id
SEARCH = "search"  # any other run (a result whose role is known, not a claim run)
CLAIM_MARK = " (claim)"  # a claim run's label ends so: how the store keeps the role
# The runs made after a proposal was decided, of its recipe and of the baseline, to report
# its gain on runs that decided nothing (the runs that confirmed it also decided when to
# stop, and read high: `Board.reports`); nothing the search or a stop rule reads holds them.
REPORT = rule_book.REPORT.id
REPORT_MARK = " (report)"


class Outcome(StrEnum):
    PENDING = "pending"  # submitted, no result yet
    OK = "ok"  # steady TGS measured (cleanup exit 143 after the last step counts)
    OOM = "oom"  # detail: the failed allocation
    UNKNOWN_FLAG = "unknown_flag"  # detail: the flag the image rejected
    NOT_APPLIED = "not_applied"  # the job's effective flags show the profile lost; detail: culprit
    FLAKE = "flake"  # RCCL flake, coordination timeout: retried


@dataclass(frozen=True)
class Result:
    profile: str
    tag: str
    outcome: Outcome
    tgs: float | None = None
    step_s: float | None = None
    detail: str = ""
    queue_s: float = 0.0  # time the job spent queued and running
    wave: int = 0
    job_id: str = ""
    loss: float | None = None
    # The planner's rule that asked for the run (SEARCH: not a claim run; "": not known,
    # a store written before roles were kept: the first run selected, the rest are fresh).
    rule: str = ""
    # The relative standard error of its TGS from its own steps (`measured_noise.run_noise`;
    # None: not read, the profiler's run, or a store written before it was kept).
    run_noise: float | None = None


class Fate(StrEnum):
    MEASURED = "measured"
    OPEN = "open"  # pending, or failed and due a retry
    UNKNOWN_FLAG = "dropped: unknown flag"
    OOM = "dropped: OOM"
    UNMEASURABLE = "dropped: unmeasurable"
    NOT_APPLIED = "dropped: not applied"


@dataclass(frozen=True)
class Entry:
    profile: str
    tag: str
    samples: tuple[float, ...]
    fate: Fate
    detail: str = ""
    flakes: int = 0
    not_applied: int = 0
    pending: bool = False
    first_wave: int = 0
    claim: tuple[bool, ...] = ()  # per sample: a run the claim reads
    held: tuple[bool, ...] = ()  # per sample: a claim run, left out of what ranks recipes
    at: tuple[float, ...] = ()  # per sample: when it ran (runs submitted before it)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else math.nan

    @property
    def ranked(self) -> tuple[float, ...]:
        """The samples the search ranks by: every run but those made for the claim."""
        if self.profile == BASELINE or not any(self.held):
            return self.samples
        return tuple(x for x, c in zip(self.samples, self.held, strict=True) if not c)

    @property
    def claimed(self) -> tuple[float, ...]:
        """The runs a verdict's gain is read from."""
        if self.profile == BASELINE:
            return self.samples
        return tuple(x for x, c in zip(self.samples, self.claim, strict=True) if c)

    @property
    def claimed_at(self) -> tuple[float, ...]:
        """When each of `claimed` ran."""
        if self.profile == BASELINE or not self.at:
            return self.at
        return tuple(x for x, c in zip(self.at, self.claim, strict=True) if c)


def with_roles(results: Sequence[Result], claim_jobs: set[str],
               report_jobs: frozenset[str] = frozenset()) -> list[Result]:
    """The store's results with their role: a claim run (its job id among `claim_jobs`,
    the jobs of runs labelled with CLAIM_MARK), a report run (REPORT_MARK) or a search run."""
    return [replace(r, rule=REPORT if r.job_id in report_jobs
                    else CLAIM if r.job_id in claim_jobs else SEARCH) for r in results]
