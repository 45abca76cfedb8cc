"""What a model perf job's steps say about the run-to-run noise, kept on the job at its end
(`Kind.job_facts`; `Job.facts`), and the noise the search allows for, read from them.

A run's TGS is the mean of its steady steps; the spread of those steps says how far that
mean may be off (its standard error): a run of 10 steps at 6 % step-to-step spread reads its
TGS to ~1.9 %, where the search's rules assume ~1 % (`search.NOISE`). Node-to-node or
day-to-day drift adds to it, which the steps cannot show: the figure is a floor.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sweepd.kinds.api import EndedJob, Facts, SweepContext
from sweepd.kinds.model_perf.probes import latest_jobs
from sweepd.kinds.model_perf.search import NOISE
from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.monitor.noise import Noise
from sweepd.monitor.steady import relative_se, steady_window

MIN_STEPS = THRESHOLDS.min_steps  # fewer steady steps say nothing about their spread
MIN_RUNS = THRESHOLDS.min_runs  # passed runs whose steps are read before the noise moves from NOISE


def lines(facts: Mapping[str, Any], new: Sequence[str]) -> Facts | None:
    """Nothing from the log's lines: the steps the monitor stores are enough."""
    return None


def ended(e: EndedJob) -> Facts | None:
    """The standard error of the run's steady-state TGS, relative (`run_noise`)."""
    if "run_noise" in e.job.facts:
        return None
    window = steady_window(bool(e.job.profiler))
    noise = relative_se((s.tgs for s in e.steps if s.step in window), MIN_STEPS)
    return None if noise is None else {**e.job.facts, "run_noise": noise}


# The runs' steps measure a noise this many times below the prior: the rules decide with the
# measure (monitor/noise.py); where a noise_floor the spec set holds them above it, the
# verdict says so (`quiet_note`).
QUIET = THRESHOLDS.quiet


def steps_noise(ctx: SweepContext[Any]) -> float | None:
    """The median of the passed runs' `run_noise` (their latest jobs); None until MIN_RUNS
    runs have it."""
    passed = {r.id for r in ctx.runs if r.outcome == "pass"}
    read = [float(j.facts["run_noise"]) for rid, j in latest_jobs(ctx.jobs).items()
            if rid in passed and isinstance(j.facts.get("run_noise"), int | float)]
    return statistics.median(read) if len(read) >= MIN_RUNS else None


def noise_track(ctx: SweepContext[Any], floor: float | None = None,
                measured: bool = False) -> Noise:
    """The sweep's noise track (monitor/noise.py): the prior (the spec's `noise_floor`, set,
    else NOISE), the floor the spec set, and what the runs' steps measured; `measured` (the
    spec's `measured_noise`): decide with a measure far below the prior. The runs made again
    add theirs in the search (`repeat.with_run_noise`)."""
    return Noise(prior=NOISE if floor is None else floor, floor=floor,
                 steps=steps_noise(ctx), limit=THRESHOLDS.noise_limit, quiet_factor=QUIET,
                 use_measure=measured)


def measures_noise(asked: bool | None, ctx: SweepContext[Any]) -> bool:
    """Whether the rules decide with the noise the runs measure (the spec's
    `measured_noise`): as the spec says, else on for one box (the local backend), where
    every run is on the same accelerator and its steps show the noise between runs (on the
    recorded TPU v5e curves the seed's 1 % chose 2.4 % and 4.5 % under the best; measured,
    the best of each: docs/benchmarks.md, "Recorded real curves"), else the seed's 1 %."""
    return ctx.one_box if asked is None else asked


def quiet_note(ctx: SweepContext[Any], floor: float | None, measured: bool = False,
               decided: float | None = None, by_default: bool = False) -> str | None:
    """Where the runs' steps measure far less noise than the prior the rules decided with:
    said, with the spec keys that would let the rules read it (on the recorded TPU chip
    curve the 1 % prior called 4, 8 and 16 level and settled the true best, 12, unrun).
    Where the rules decided with the measure (`measured_noise`; `decided`, the search's
    noise, under the prior), there is nothing to say; where they kept the prior, why."""
    track = noise_track(ctx, floor, measured)
    if track.below_prior or not track.far_below:
        return None
    figure = track.steps or 0.0
    if measured:
        # The track here has the steps alone; the search's pair (noise_probe) decided, and
        # the verdict's noise caveat says so where it moved the noise under the prior. The
        # person is told which rule applied where they did not ask for it.
        if decided is not None and decided < track.prior:
            return (f"the rules decided with the noise the runs measured, {decided:.2%}, not "
                    f"the seed's {track.prior:.1%}: on one box (the local backend) a run's "
                    "steps show the noise between its runs, so measured_noise is on by "
                    "default there; measured_noise: false keeps the seed's rule"
                    ) if by_default else None
        return (
            f"the runs' own steps put the run-to-run noise at about {figure:.2%}, far below "
            f"the {track.prior:.1%} the rules assumed, but no value ran twice to measure it "
            "between runs, or one run again spread wider than the steps said: the rules "
            "kept the prior")
    return (f"the runs' own steps put the run-to-run noise at about {figure:.2%}, far below "
            f"the {track.prior:.1%} the rules assumed (the spec's noise_floor): values closer "
            f"than that were read as level and gaps settled on it; noise_floor: "
            f"{max(figure * 2, THRESHOLDS.noise_limit):.4f}, or measured_noise: true, lets "
            "the search tell them apart (more runs)")


def run_noise(ctx: SweepContext[Any], floor: float | None = None, measured: bool = False
              ) -> float:
    """The noise the search allows for: the track's decided figure (monitor/noise.py). The
    prior is the spec's `noise_floor` where it sets one (5 % is 5 % from the first run on),
    else NOISE."""
    return noise_track(ctx, floor, measured).decided
