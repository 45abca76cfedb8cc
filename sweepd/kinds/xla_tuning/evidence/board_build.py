"""Building the board from the results, in the order they were submitted (the sweep's
clock): each profile's entry and fate, and the cell's own per-run noise (`pooled_noise`:
the pooled spread of every profile measured more than once, shrunk towards the prior
(~0.8 %, xla-tuning-facts.md) while few repeats exist; a pinned nodelist runs at 0.3-1 %,
SKILL.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import (
    CLAIM_RULES,
    REPORT,
    Entry,
    Fate,
    Outcome,
    Result,
)
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS

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
          drift: DriftRead = THRESHOLDS.drift) -> Board:
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
        step_noise=tuple(r.run_noise for r in results
                         if r.outcome is Outcome.OK and r.run_noise is not None),
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
