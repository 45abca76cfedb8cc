"""One noise track (sweepd/monitor/noise.py): the prior, the steps' spread, the runs made again;
the decisions use the measure once it is far below the prior and a value ran twice (the
leader runs again early: `model_perf.noise_probe`), never below the stated limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.jobfacts import run_noise
from sweepd.kinds.model_perf.rules import NOISE_PROBE, REPEAT
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
    # Quiet steps alone: the prior holds until a value has run twice (the early repeat);
    # before, the steps' figure decided the climb and the repeat came last.
    quiet = Noise(prior=0.01, steps=0.0002)
    assert quiet.quiet and quiet.awaits_probe and quiet.decided == 0.01
    paired = replace(quiet, between=0.0001, between_free=1)
    assert not paired.awaits_probe and paired.decided == THRESHOLDS.noise_limit == 0.0005
    # The earlier way (early=False): the steps alone decide, the best confirmed at the end.
    late = replace(quiet, early=False)
    assert late.decided == 0.0005 and late.unconfirmed
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


def test_the_leader_runs_again_after_the_second_pass_before_the_steps_decide() -> None:
    """Fails before: two passes on quiet steps, and the search went on at the steps' 0.05 %
    (a secant step), the repeat only at the end."""
    space = _space(0.0003)
    assert space.noise == NOISE
    two = [Probe(16, Outcome.OK, 1000.0), Probe(32, Outcome.OK, 960.0)]
    step = next_probe(space, two, runs_left=10, thorough=True)
    assert step is not None and (step.value, step.repeat, step.rule) == (16, True, NOISE_PROBE.id)
    # Once: a value run twice (here a failed run of the leader) ends it.
    failed = [*two, Probe(16, Outcome.FAILED, None)]
    after = next_probe(space, failed, runs_left=9, thorough=True)
    assert after is None or after.rule != NOISE_PROBE.id
    # No budget for it and a run the search decides with: the prior stays, no probe.
    last = next_probe(space, two, runs_left=THRESHOLDS.noise_probe_left - 1, thorough=True)
    assert last is None or last.rule != NOISE_PROBE.id
    # The earlier way (early=False): the steps decide and the best runs again at the end.
    assert space.track is not None
    late_track = replace(space.track, early=False)
    late = replace(space, track=late_track, noise=late_track.decided)
    runs = [Probe(8, Outcome.OK, 990.0), Probe(16, Outcome.OK, 1000.0),
            Probe(24, Outcome.OK, 997.0), Probe(32, Outcome.OK, 960.0)]
    step = next_probe(late, runs, runs_left=8, thorough=True)
    assert step is not None and (step.value, step.repeat, step.rule) == (16, True, REPEAT.id)
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
    # A single pair just over the prior (1.1 %) on steps it contradicts is one pair's chance
    # at the prior (under FLAT / sqrt 2): the prior, as without the steps (before: 1.1 %).
    near = [*runs[:4], Probe(16, Outcome.OK, 984.5)]
    told = with_run_noise(space, near)
    assert told.track is not None and told.track.steps_missed
    assert told.noise == NOISE and told.noise_between == 0


def test_a_space_without_a_track_reads_as_before() -> None:
    plain = SearchSpace((8, 16, 24), None, True, work_grows=True)
    close = [Probe(16, Outcome.OK, 1000.0), Probe(16, Outcome.OK, 1001.0)]
    assert with_run_noise(plain, close) == plain
    assert replace(plain, noise=0.02).track is None


def test_the_quiet_note_under_measured_noise_says_why_the_prior_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails before: with measured_noise on and the prior kept (no pair yet, or a pair that
    spread wider), the note suggested `measured_noise: true`, the option already set."""
    from sweepd.kinds.model_perf import jobfacts
    monkeypatch.setattr(jobfacts, "steps_noise", lambda ctx: 0.0003)
    ctx: SweepContext[PerfFacts] = SweepContext(runs=[], nodes=["n1"], gpu_memory_gib=16,
                                                         facts=PerfFacts())
    kept = jobfacts.quiet_note(ctx, None, measured=True, decided=NOISE)
    assert kept is not None and "measured_noise: true" not in kept
    assert jobfacts.quiet_note(ctx, None, measured=True, decided=0.0005) is None
    plain = jobfacts.quiet_note(ctx, None)
    assert plain is not None and "measured_noise: true" in plain
