"""What the planner is given (the spec's inputs, with the SKILL.md's thresholds as defaults)
and the results so far, as it judges them: per profile, its samples, its fate.

Noise-aware: a profile's delta is its mean TGS over the baseline's mean, with the standard
error of that difference from the per-run noise and both sample counts, so one lucky run
never carries a verdict. Honest: a profile's first run is the one that selected it (a
screening run, kept for ranking); what a verdict claims and what lets it stop is its
*fresh* delta, from the runs after that one (`fresh_delta`, `fresh_se`, `interval`), so the
claim carries no winner's curse. The per-run noise is the cell's own: the pooled spread of every
profile measured more than once, shrunk towards the prior (~0.8 %, xla-tuning-facts.md)
while few repeats exist (a pinned nodelist runs at 0.3-1 %, SKILL.md). A claim's bounds
never shrink it below the cell's measured spread (`claim_noise`): a noisy cluster runs at
2-2.5 %, and the prior pulled its estimate down to 0.6-1.5 % while few repeats existed.

Drift-aware (`Inputs.drift`, `drift.py`): a claim's runs are read against the baseline's
level where they ran, not its mean over the sweep (`base_level`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from sweepd.kinds.xla_tuning.catalog import Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.drift import DEFAULT as DRIFT_DEFAULT
from sweepd.kinds.xla_tuning.drift import DriftRead, level

BASELINE = "baseline"
RESTORE = "restore_default"
EVIDENCE = "evidence"
Z95 = 1.96  # a verdict's interval, widened to Student's t by `Board.t` as the win rule is
Z_ONE = 1.645
# one-sided 95 %: "significantly above" a bar
# The rules of the runs made to measure a recipe's claim once it was put forward: its
# gain is read from these alone, and nothing that names or keeps it reads them.
CLAIM_RULES = frozenset({"noise.confirm", "noise.near_line"})
CLAIM = "noise.confirm"
SEARCH = "search"  # any other run (a result whose role is known, not a claim run)
CLAIM_MARK = " (claim)"  # a claim run's label ends so: how the store keeps the role
# The runs made after a proposal was decided, of its recipe and of the baseline, to report
# its gain on runs that decided nothing (the runs that confirmed it also decided when to
# stop, and read high: `Board.reports`); nothing the search or a stop rule reads holds them.
REPORT = "claim.report"
REPORT_MARK = " (report)"


@dataclass(frozen=True)
class Inputs:
    parallelism: Parallelism
    catalog: tuple[Profile, ...]
    tags: tuple[str, ...] = ("default",)  # the first is the primary config tag
    deployed: tuple[Setting, ...] = ()  # what the model's env file sets (the Inventory)
    win: float = 0.05  # stop rule 1: a confirmed recipe at least this much faster
    bounded_gain: float = 0.02  # stop rule 2: none of >= bounded_count profiles beats this
    bounded_count: int = 25
    regress: float = 0.01  # no other config tag may lose more than this
    max_queue_s: float = 8 * 3600.0  # stop rule 3
    noise: float = 0.008  # relative std of one run: the prior of the cell's own estimate
    wave_size: int = 8
    max_flakes: int = 3
    max_flags: int = 3
    # Mechanisms (in evidence order) seeded in full before a winner may end the sweep; all
    # by default: a winner elsewhere would be missed (measured: docs/benchmarks.md).
    focus: int = 99
    microbatches: int | None = None  # the config's num_pipeline_microbatches (Wave 5)
    # `seed`: the SKILL.md's stop rules as written (a confirmed >= +5 % recipe, once Wave 6
    # shows it regresses no other tag, ends the sweep); `thorough`: the winner rule waits
    # until the search has plateaued (for a person who wants the best, not good enough).
    stop: str = "seed"
    # Runs each of a proposal's recipe and of the baseline made after it was decided, its
    # gain reported from them alone (0: from the runs that confirmed it, as the SKILL.md).
    report_runs: int = 2
    # What of the catalog the search left unrun (first values of mechanisms never seeded,
    # then the numeric families' untried values) runs in the queue time a bounded verdict
    # would leave unused, before it (False: the SKILL.md's rule as it comes; `family_gaps.py`).
    family_gaps: bool = True
    # How a claim reads the baseline beside it (`drift.py`); but for `mean`, the baseline
    # runs beside the claim's runs.
    drift: DriftRead = DRIFT_DEFAULT


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


@dataclass(frozen=True)
class Board:
    entries: dict[tuple[str, str], Entry]
    noise: float
    queue_s: float
    pending: int
    waves: tuple[int, ...] = field(default=())
    runs: int = 0  # every result, failures included
    noise_df: int = 0  # degrees of freedom behind `noise` (the prior's PRIOR_DF included)
    spread: float = 0.0  # the cell's own pooled spread (relative std), no prior; 0: none
    # The runs made after a proposal was decided (rule REPORT), by (profile, tag): apart
    # from `entries`, so that nothing which decides reads them.
    reports: dict[tuple[str, str], Entry] = field(default_factory=dict)
    drift: DriftRead = DRIFT_DEFAULT  # how a claim reads the baseline beside it

    def base_level(self, tag: str, at: Sequence[float]) -> tuple[float, float] | None:
        """The baseline's level at the mean of the times `at` and the variance of that level
        relative to one run's (1/n for a mean of n), read as `drift` says."""
        b = self.base(tag)
        if b is None:
            return None
        return level(b.samples, b.at, at, self.drift, self.claim_noise, self.per_run)

    def t(self, z: float) -> float:
        """The normal quantile z widened to Student's t at the noise estimate's degrees of
        freedom (Cornish-Fisher): a bound on an estimated noise is wider than on a known
        one (a cell whose repeats happened to agree would otherwise confirm on luck)."""
        v = self.noise_df
        if v <= 0:
            return z
        return z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v * v)

    @property
    def claim_noise(self) -> float:
        """The per-run noise a claim's bounds read: the prior-shrunk estimate, never below
        the cell's measured spread (the prior is a floor for a cell that measured quieter,
        not a pull down on one that measured noisier: 2-2.5 % clusters were read at 0.6-1.5 %
        while few repeats existed)."""
        return max(self.noise, self.spread)

    def get(self, profile: str, tag: str) -> Entry | None:
        return self.entries.get((profile, tag))

    def base(self, tag: str) -> Entry | None:
        e = self.get(BASELINE, tag)
        return e if e is not None and e.n else None

    def delta(self, profile: str, tag: str) -> float | None:
        e, b = self.get(profile, tag), self.base(tag)
        if e is None or not e.n or b is None:
            return None
        return statistics.fmean(e.ranked) / b.mean - 1

    def se(self, profile: str, tag: str) -> float:
        """Standard error of the delta (relative), from both sample counts."""
        e, b = self.get(profile, tag), self.base(tag)
        n, nb = (len(e.ranked) if e else 0) or 1, (b.n if b else 0) or 1
        return self.noise * math.sqrt(1 / n + 1 / nb)

    def search_delta(self, profile: str, tag: str) -> float | None:
        """The delta over every run, the claim's runs too: what the search explores by
        (which values, stacks and families to try next). What a verdict names and keeps
        reads `delta`, which leaves the claim's runs out."""
        e, b = self.get(profile, tag), self.base(tag)
        if e is None or not e.n or b is None:
            return None
        return e.mean / b.mean - 1

    def search_se(self, profile: str, tag: str) -> float:
        e, b = self.get(profile, tag), self.base(tag)
        n, nb = (e.n if e else 0) or 1, (b.n if b else 0) or 1
        return self.noise * math.sqrt(1 / n + 1 / nb)

    def fresh(self, profile: str, tag: str) -> tuple[float, ...]:
        """The runs that did not select the profile: all but its first (the screening run
        that put it forward). The baseline is never selected: all of its runs count."""
        e = self.get(profile, tag)
        if e is None:
            return ()
        return e.claimed

    def retest(self, profile: str, tag: str) -> tuple[float, ...]:
        """The runs after the one that selected the profile that the search may read (its
        re-runs and part checks; not the claim's): what a part test compares."""
        e = self.get(profile, tag)
        return e.ranked[1:] if e is not None else ()

    def retest_delta(self, profile: str, tag: str) -> float | None:
        got, b = self.retest(profile, tag), self.base(tag)
        if not got or b is None:
            return None
        return statistics.fmean(got) / b.mean - 1

    def fresh_at(self, profile: str, tag: str) -> tuple[float, ...]:
        e = self.get(profile, tag)
        return e.claimed_at if e is not None else ()

    def fresh_delta(self, profile: str, tag: str) -> float | None:
        got = self.fresh(profile, tag)
        level = self.base_level(tag, self.fresh_at(profile, tag))
        if not got or level is None or level[0] <= 0:
            return None
        return statistics.fmean(got) / level[0] - 1

    def fresh_se(self, profile: str, tag: str) -> float:
        n = len(self.fresh(profile, tag)) or 1
        level = self.base_level(tag, self.fresh_at(profile, tag))
        return self.claim_noise * math.sqrt(1 / n + (level[1] if level else 1.0))

    def interval(self, profile: str, tag: str, z: float = Z95) -> tuple[float, float] | None:
        """The fresh delta's interval (95 % by default); None without a fresh run. Its
        quantile is Student's t at the pooled noise's degrees of freedom, as the win rule's:
        at 1.96 with few repeats and the noise shrunk toward the prior, it covered 82-91 %
        of truths at 2-2.5 % noise."""
        d = self.fresh_delta(profile, tag)
        if d is None:
            return None
        half = self.t(z) * self.fresh_se(profile, tag)
        return d - half, d + half

    def above(self, profile: str, tag: str, bar: float) -> bool:
        """Significantly above `bar` on fresh runs (one-sided, Z_ONE)."""
        d = self.fresh_delta(profile, tag)
        return d is not None and d - Z_ONE * self.fresh_se(profile, tag) > bar

    @property
    def per_run(self) -> float:
        """Mean queue time per run so far (the cluster's clock, as the results carry it)."""
        return self.queue_s / max(1, self.runs)

    def reported(self, profile: str, tag: str) -> tuple[float, ...]:
        e = self.reports.get((profile, tag))
        return e.samples if e is not None else ()

    def report_delta(self, profile: str, tag: str) -> float | None:
        """The gain on the runs made after the decision, against the baseline's runs made
        beside them."""
        got, base = self.reported(profile, tag), self.reported(BASELINE, tag)
        if not got or not base:
            return None
        return statistics.fmean(got) / statistics.fmean(base) - 1

    def report_se(self, profile: str, tag: str) -> float:
        n, nb = len(self.reported(profile, tag)) or 1, len(self.reported(BASELINE, tag)) or 1
        return self.claim_noise * math.sqrt(1 / n + 1 / nb)

    def report_interval(self, profile: str, tag: str, z: float = Z95
                        ) -> tuple[float, float] | None:
        d = self.report_delta(profile, tag)
        if d is None:
            return None
        half = self.t(z) * self.report_se(profile, tag)
        return d - half, d + half

    def parts_run(self, tag: str) -> set[str]:
        """Every profile run on `tag`, alone or as a part of a stack."""
        return {part for (name, t) in self.entries if t == tag for part in name.split("+")}

    def measured(self, tag: str) -> list[Entry]:
        skip = {BASELINE, EVIDENCE}
        return [e for (p, t), e in self.entries.items() if t == tag and e.n and p not in skip]


def with_roles(results: Sequence[Result], claim_jobs: set[str],
               report_jobs: frozenset[str] = frozenset()) -> list[Result]:
    """The store's results with their role: a claim run (its job id among `claim_jobs`,
    the jobs of runs labelled with CLAIM_MARK), a report run (REPORT_MARK) or a search run."""
    return [replace(r, rule=REPORT if r.job_id in report_jobs
                    else CLAIM if r.job_id in claim_jobs else SEARCH) for r in results]


PRIOR_DF = 4  # the prior noise weighs as much as this many degrees of freedom of repeats


def pooled_noise(ss: float, df: int, prior: float) -> float:
    """Relative std of one run: pooled over every repeated profile (`_repeats`), shrunk to
    the prior."""
    return math.sqrt((PRIOR_DF * prior**2 + ss) / (PRIOR_DF + df))


def _repeats(entries: Sequence[Entry]) -> tuple[float, int]:
    ss, df = 0.0, 0
    for e in entries:
        if e.n >= 2:
            m = e.mean
            ss += sum((x / m - 1) ** 2 for x in e.samples)
            df += e.n - 1
    return ss, df


def build(results: Sequence[Result], noise: float, max_flakes: int,
          drift: DriftRead = DRIFT_DEFAULT) -> Board:
    """The board of `results`, in the order they were submitted (the sweep's clock)."""
    grouped: dict[tuple[str, str], list[tuple[int, Result]]] = {}
    reported: dict[tuple[str, str], list[tuple[int, Result]]] = {}
    for i, r in enumerate(results):
        (reported if r.rule == REPORT else grouped).setdefault((r.profile, r.tag), []).append(
            (i, r))
    entries = {key: _entry(key, rs, max_flakes) for key, rs in grouped.items()}
    ss, df = _repeats(list(entries.values()))
    return Board(
        entries,
        pooled_noise(ss, df, noise),
        queue_s=sum(r.queue_s for r in results),
        pending=sum(r.outcome is Outcome.PENDING for r in results),
        waves=tuple(sorted({r.wave for r in results})),
        runs=len(results),
        noise_df=PRIOR_DF + df,
        spread=math.sqrt(ss / df) if df else 0.0,
        reports={key: _entry(key, rs, max_flakes) for key, rs in reported.items()},
        drift=drift,
    )


def _entry(key: tuple[str, str], timed: list[tuple[int, Result]], max_flakes: int) -> Entry:
    rs = [r for _, r in timed]
    at = tuple(float(i) for i, r in timed if r.outcome is Outcome.OK and r.tgs is not None)
    oks = [r for r in rs if r.outcome is Outcome.OK and r.tgs is not None]
    samples = tuple(r.tgs for r in oks if r.tgs is not None)
    claim = tuple(r.rule in CLAIM_RULES or (not r.rule and i > 0) for i, r in enumerate(oks))
    held = tuple(r.rule in CLAIM_RULES for r in oks)
    flakes = sum(r.outcome is Outcome.FLAKE for r in rs)
    lost = [r for r in rs if r.outcome is Outcome.NOT_APPLIED]
    pending = any(r.outcome is Outcome.PENDING for r in rs)
    fate, detail = Fate.MEASURED if samples else Fate.OPEN, ""
    for r in rs:  # a hard failure drops the profile at once: same flags, same failure
        if r.outcome is Outcome.UNKNOWN_FLAG:
            fate, detail = Fate.UNKNOWN_FLAG, r.detail
        elif r.outcome is Outcome.OOM:
            fate, detail = Fate.OOM, r.detail
    if fate is Fate.OPEN and flakes >= max_flakes:
        fate, detail = Fate.UNMEASURABLE, f"{flakes} flakes"
    if fate is Fate.OPEN and lost:
        detail = lost[-1].detail  # the culprit: what won over the profile's flags
        if len(lost) >= 2:  # retried once with the arms placed to win
            fate = Fate.NOT_APPLIED
    return Entry(key[0], key[1], samples, fate, detail, flakes, len(lost), pending,
                 min(r.wave for r in rs), claim, held, at)
