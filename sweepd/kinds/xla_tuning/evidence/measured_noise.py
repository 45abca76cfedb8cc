"""What the runs themselves measured of the cell's run-to-run noise, apart from the prior
the rules read (`thresholds.noise`, 0.8 %): read by the verdict's QUIET caveat
(`verdict/quiet.py`), which decides nothing.

Two readings, each from the store alone:
- a run's own steps (`run_noise`, kept on the job at its end, `jobfacts.ended`): its TGS is
  the mean of its steady steps, and their spread says how far that mean may be off (its
  standard error, relative). Drift between runs, node to node or hour to hour, is not in it.
- the spread between runs of the same profile on the same tag (the baseline's pair, a
  recipe's re-runs: `Board.spread`, pooled, no prior).

The cell's figure is the larger of those read (each from at least READINGS runs or degrees of
freedom): a floor the steps alone could set too low where runs drift, a spread a few repeats
could set too low by luck. On the real TPU v5e chip the steps read ~0.1 % a run and runs
agreed within 0.03 %; the prior is 0.8 %.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import PRIOR_DF
from sweepd.monitor.steady import relative_se, steady_window
from sweepd.store.rows import StepRow

STEADY_STEPS = 4  # fewer steady steps say nothing about their spread
READINGS = 3      # runs (steps) or degrees of freedom (repeats) before a reading counts


def run_noise(steps: Sequence[StepRow], profiler: bool) -> float | None:
    """The relative standard error of a run's steady TGS from its own steps; None for a run
    with the profiler (it perturbs the steps it times) or fewer than STEADY_STEPS of them."""
    if profiler:
        return None
    window = steady_window(profiler)
    return relative_se((s.tgs for s in steps if s.step in window), STEADY_STEPS)


@dataclass(frozen=True)
class Measured:
    """The cell's run-to-run noise as its runs measured it (relative std of one run)."""

    value: float                 # the larger of the readings below that count
    steps: float | None          # the median of the runs' own `run_noise`
    step_runs: int               # runs behind it
    between: float | None        # the pooled spread between runs of a profile
    df: int                      # its degrees of freedom


def measured(board: Board) -> Measured | None:
    """The noise the runs measured (`Measured`); None while neither reading counts."""
    # A reading of exactly 0 measures nothing (identical figures: runs written by hand, or
    # a log printing too few digits): no real run repeats to the last digit.
    steps = statistics.median(board.step_noise) \
        if len(board.step_noise) >= READINGS else None
    df = board.noise_df - PRIOR_DF
    between = board.spread if df >= READINGS else None
    steps, between = steps or None, between or None
    read = [x for x in (steps, between) if x is not None]
    if not read:
        return None
    return Measured(max(read), steps, len(board.step_noise), between, df)
