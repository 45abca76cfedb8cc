"""Where the baseline stands beside a claim's runs, on a cluster that may drift.

A real cluster drifts (thermals, neighbours, file-system load) while the baseline runs
mostly early and a recipe's claim runs late, so the baseline's mean over the sweep is not
its level beside the claim: read against it, 4 % over 8 h made flat cells propose a recipe
in half the sweeps and a +4.6 % recipe ">= +5 %" in 18 % (docs/benchmarks.md). Three
readings (`thresholds.drift`, its default declared there):

- `mean`: the baseline's mean over the sweep (the SKILL.md's reading, which assumes no drift);
- `line`: the least-squares line through the baseline's runs over the sweep's clock, read at
  the claim runs' mean time; its slope, fitted on a few runs, adds its noise to every claim;
- `trend` (default): that slope shrunk toward no drift by a prior of `PRIOR` per 8 h (the
  posterior of a normal prior on the slope): where the baseline's runs show no trend the
  reading is the mean's, where they show one it follows it. At no drift it measured as
  `mean` does; under drift as `line` does (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

# The readings' names live with the option's default in the record (a leaf).
from sweepd.kinds.xla_tuning.thresholds import DriftRead as DriftRead

PRIOR = 0.02  # the spread of a cluster's drift, relative per 8 h (a red team's 2 %)
PRIOR_S = 8 * 3600.0


def level(samples: Sequence[float], at: Sequence[float], when: Sequence[float],
          read: DriftRead, noise: float, per_run_s: float) -> tuple[float, float]:
    """The baseline's level at the mean of the times `when` (run indices, as `at`) and its
    variance relative to one run's (1/n for a mean of n). `noise` is one run's relative
    std, `per_run_s` the queue time of one run (the prior's clock)."""
    n = len(samples)
    mean = statistics.fmean(samples)
    if read is DriftRead.MEAN or not when or len(at) != n:
        return mean, 1 / n
    ta = statistics.fmean(at)
    sxx = sum((x - ta) ** 2 for x in at)
    if sxx <= 0:
        return mean, 1 / n
    slope = sum((x - ta) * y for x, y in zip(at, samples, strict=True)) / sxx
    gap = statistics.fmean(when) - ta
    keep = 1.0  # the share of the fitted slope read (the line: all of it)
    if read is DriftRead.TREND:
        tau = PRIOR * mean * per_run_s / PRIOR_S  # the prior's std of the slope per run
        fitted = (noise * mean) ** 2 / sxx  # the fitted slope's variance
        keep = tau * tau / (tau * tau + fitted) if tau > 0 else 0.0
    return mean + keep * slope * gap, 1 / n + keep * gap * gap / sxx
