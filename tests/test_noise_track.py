"""One noise track (sweepd/monitor/noise.py): the prior, the steps' spread, the runs made again;
the decisions use the measure once it is far below the prior, never below the stated limit,
and the best runs again before a verdict rests on the steps alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.jobfacts import run_noise
from sweepd.kinds.model_perf.search import (
    NOISE,
    Outcome,
    Probe,
    SearchSpace,
    next_probe,
    with_run_noise,
)
from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.monitor.noise import Noise


def test_nothing_measured_keeps_the_prior() -> None:
    assert Noise(prior=0.01).decided == 0.01
    assert Noise(prior=0.05, floor=0.05).decided == 0.05


def test_a_spec_floor_is_the_noise_from_the_first_run_on() -> None:
    """Before: `run_noise` gave 0.01 for a floor of 0.05 until two runs had steps to read,
    against its docstring ("never below floor")."""
    ctx: SweepContext[PerfFacts] = SweepContext(runs=[], nodes=["n1"], gpu_memory_gib=16,
                                                         facts=PerfFacts())
    assert run_noise(ctx, 0.05) == 0.05
    assert run_noise(ctx) == NOISE


def test_quiet_steps_decide_never_below_the_limit() -> None:
    quiet = Noise(prior=0.01, steps=0.0002)
    assert quiet.quiet and quiet.decided == THRESHOLDS.noise_limit == 0.0005
    assert quiet.unconfirmed
    # A measure a little under the prior is not far below it: the prior stands.
    assert Noise(prior=0.01, steps=0.004).decided == 0.01
    # More noise than the prior is never ignored.
    assert Noise(prior=0.01, steps=0.03).decided == 0.03
    # A floor the spec set holds.
    assert Noise(prior=0.002, floor=0.002, steps=0.0003).decided == 0.002
    # Runs made again that agree with the steps confirm them; a spread 6x the steps says the
    # steps miss the runs' own offset: the prior holds again (before: the pair's 0.3 %
    # decided, and the bench's quiet-stepped 0.8 % runs lost 2.7 points found).
    assert Noise(prior=0.01, steps=0.0005, between=0.0008, between_free=1).decided == 0.0008
    missed = Noise(prior=0.01, steps=0.0005, between=0.003, between_free=1)
    assert missed.steps_missed and missed.decided == 0.01
    assert "miss the runs' own offset" in missed.source()
    # Above the prior, the pair's figure as before.
    assert Noise(prior=0.01, steps=0.0005, between=0.02, between_free=1).decided == 0.02


def _space(steps: float) -> SearchSpace:
    track = Noise(prior=NOISE, steps=steps, limit=THRESHOLDS.noise_limit)
    return SearchSpace((8, 16, 24, 32), None, True, work_grows=True, noise=track.decided,
                       track=track)


def test_the_best_runs_again_before_a_verdict_rests_on_the_steps_alone() -> None:
    space = _space(0.0003)
    runs = [Probe(8, Outcome.OK, 990.0), Probe(16, Outcome.OK, 1000.0),
            Probe(24, Outcome.OK, 997.0), Probe(32, Outcome.OK, 960.0)]
    step = next_probe(space, runs, runs_left=8, thorough=True)
    assert step is not None and step.value == 16 and step.repeat
    # Run again within the noise the steps said: confirmed, the verdict follows.
    again = [*runs, Probe(16, Outcome.OK, 1000.4)]
    told = with_run_noise(space, again)
    assert told.track is not None and told.track.between is not None
    assert told.noise == pytest.approx(0.0005)
    assert next_probe(space, again, runs_left=7, thorough=True) is None


def test_a_repeat_that_spreads_wider_raises_the_noise() -> None:
    """A pair 0.8 % apart on steps at 0.03 %: the steps miss the runs' offset, so the prior
    decides again (before: the pair's 0.57 %, under the prior)."""
    space = _space(0.0003)
    runs = [Probe(8, Outcome.OK, 990.0), Probe(16, Outcome.OK, 1000.0),
            Probe(24, Outcome.OK, 997.0), Probe(32, Outcome.OK, 960.0),
            Probe(16, Outcome.OK, 992.0)]
    told = with_run_noise(space, runs)
    assert told.track is not None and told.track.steps_missed
    assert told.noise == NOISE and told.noise_between == 0
    # A pair wider than the prior: its own figure, as before.
    wide = [*runs[:4], Probe(16, Outcome.OK, 975.0)]
    told = with_run_noise(space, wide)
    assert told.noise > NOISE and told.noise_between == 1


def test_a_space_without_a_track_reads_as_before() -> None:
    plain = SearchSpace((8, 16, 24), None, True, work_grows=True)
    close = [Probe(16, Outcome.OK, 1000.0), Probe(16, Outcome.OK, 1001.0)]
    assert with_run_noise(plain, close) == plain
    assert replace(plain, noise=0.02).track is None
