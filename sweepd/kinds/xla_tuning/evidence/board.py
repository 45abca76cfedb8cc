"""The board: the results so far as the planner judges them, per profile and tag, and its
readings of them (a profile's delta over the baseline, its standard error, its interval).

Noise-aware: a profile's delta is its mean TGS over the baseline's mean, with the standard
error of that difference from the per-run noise and both sample counts, so one lucky run
never carries a verdict. Honest: what a verdict claims and what lets it stop is a profile's
*fresh* delta, from the runs after the one that selected it (`board.claim`: `ClaimReadings`'
`fresh`, `delta`, `se`, `interval`), so the claim carries no winner's curse. A claim's bounds
never shrink it below the cell's measured spread (`claim_noise`): a noisy cluster runs at
2-2.5 %, and the prior pulled its estimate down to 0.6-1.5 % while few repeats existed. The
runs made after a proposal was decided are read apart (`board.report`: `ReportReadings`).
How the board is built and its noise pooled: `board_build.py`.

Drift-aware (`Inputs.drift`, `drift.py`): a claim's runs are read against the baseline's
level where they ran, not its mean over the sweep (`ClaimReadings.base_level`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from sweepd.kinds.xla_tuning.evidence.drift import DriftRead, level
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Entry
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS

Z95 = 1.96  # a verdict's interval, widened to Student's t by `Board.t` as the win rule is
Z_ONE = 1.645
# one-sided 95 %: "significantly above" a bar


@dataclass(frozen=True)
class Board:
    """The entries per (profile, tag) and the cell's noise: the lookups and the search's
    readings (`delta` leaves the claim's runs out, `search_delta` reads every run); a
    claim's readings are `claim`'s, the report block's `report`'s."""

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
    drift: DriftRead = THRESHOLDS.drift  # how a claim reads the baseline beside it
    # Each measured run's own reading of its noise, from its steps (`Result.run_noise`):
    # read by the verdict's QUIET caveat alone (`measured_noise.py`), never by a rule.
    step_noise: tuple[float, ...] = ()

    @property
    def claim(self) -> ClaimReadings:
        """What a claim reads: a profile's fresh runs against the baseline beside them."""
        return ClaimReadings(self)

    @property
    def report(self) -> ReportReadings:
        """What the report block reads: the runs made after the decision (`reports`)."""
        return ReportReadings(self)

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

    @property
    def per_run(self) -> float:
        """Mean queue time per run so far (the cluster's clock, as the results carry it)."""
        return self.queue_s / max(1, self.runs)

    def parts_run(self, tag: str) -> set[str]:
        """Every profile run on `tag`, alone or as a part of a stack."""
        return {part for (name, t) in self.entries if t == tag for part in name.split("+")}

    def measured(self, tag: str) -> list[Entry]:
        skip = {BASELINE, EVIDENCE}
        return [e for (p, t), e in self.entries.items() if t == tag and e.n and p not in skip]


@dataclass(frozen=True)
class ClaimReadings:
    """A claim's readings (`board.claim`): a profile's fresh runs, those after the one that
    selected it, against the baseline's level where they ran; what a verdict claims and
    what lets it stop."""

    board: Board

    def base_level(self, tag: str, at: Sequence[float]) -> tuple[float, float] | None:
        """The baseline's level at the mean of the times `at` and the variance of that level
        relative to one run's (1/n for a mean of n), read as `drift` says."""
        board = self.board
        b = board.base(tag)
        if b is None:
            return None
        return level(b.samples, b.at, at, board.drift, board.claim_noise, board.per_run)

    def fresh(self, profile: str, tag: str) -> tuple[float, ...]:
        """The runs that did not select the profile: all but its first (the screening run
        that put it forward). The baseline is never selected: all of its runs count."""
        e = self.board.get(profile, tag)
        if e is None:
            return ()
        return e.claimed

    def fresh_at(self, profile: str, tag: str) -> tuple[float, ...]:
        e = self.board.get(profile, tag)
        return e.claimed_at if e is not None else ()

    def delta(self, profile: str, tag: str) -> float | None:
        """The fresh delta: the fresh runs' mean over the baseline's level beside them."""
        got = self.fresh(profile, tag)
        level = self.base_level(tag, self.fresh_at(profile, tag))
        if not got or level is None or level[0] <= 0:
            return None
        return statistics.fmean(got) / level[0] - 1

    def se(self, profile: str, tag: str) -> float:
        n = len(self.fresh(profile, tag)) or 1
        level = self.base_level(tag, self.fresh_at(profile, tag))
        return self.board.claim_noise * math.sqrt(1 / n + (level[1] if level else 1.0))

    def interval(self, profile: str, tag: str, z: float = Z95) -> tuple[float, float] | None:
        """The fresh delta's interval (95 % by default); None without a fresh run. Its
        quantile is Student's t at the pooled noise's degrees of freedom, as the win rule's:
        at 1.96 with few repeats and the noise shrunk toward the prior, it covered 82-91 %
        of truths at 2-2.5 % noise."""
        d = self.delta(profile, tag)
        if d is None:
            return None
        half = self.board.t(z) * self.se(profile, tag)
        return d - half, d + half

    def above(self, profile: str, tag: str, bar: float) -> bool:
        """Significantly above `bar` on fresh runs (one-sided, Z_ONE)."""
        d = self.delta(profile, tag)
        return d is not None and d - Z_ONE * self.se(profile, tag) > bar


@dataclass(frozen=True)
class ReportReadings:
    """The report block's readings (`board.report`): the runs of a recipe and of the
    baseline made after a proposal was decided, which decided nothing."""

    board: Board

    def runs(self, profile: str, tag: str) -> tuple[float, ...]:
        e = self.board.reports.get((profile, tag))
        return e.samples if e is not None else ()

    def delta(self, profile: str, tag: str) -> float | None:
        """The gain on the runs made after the decision, against the baseline's runs made
        beside them."""
        got, base = self.runs(profile, tag), self.runs(BASELINE, tag)
        if not got or not base:
            return None
        return statistics.fmean(got) / statistics.fmean(base) - 1

    def se(self, profile: str, tag: str) -> float:
        n, nb = len(self.runs(profile, tag)) or 1, len(self.runs(BASELINE, tag)) or 1
        return self.board.claim_noise * math.sqrt(1 / n + 1 / nb)

    def interval(self, profile: str, tag: str, z: float = Z95) -> tuple[float, float] | None:
        d = self.delta(profile, tag)
        if d is None:
            return None
        half = self.board.t(z) * self.se(profile, tag)
        return d - half, d + half
