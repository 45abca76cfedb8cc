"""The step-time bound: a step never takes less time when it carries more work, so TGS at
batch b is at most TGS at a smaller run a times b / a. It settles a gap the TGS trend
leaves open (above the lowest run, when the best is far higher), and only for the batch."""

from __future__ import annotations

from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    next_probe,
    upper_bound,
    why_not_run,
)
from tests.golden_files import GOLDEN, check_golden_cases

# A slow run at 4, the best at 12, 13 a little lower, 14 OOMs: the only gap with room is
# 5..11. The secant 12-13, extended down, allows up to +4.7% there; 4's TGS times 11/4
# (with 2% for noise) is 1122, far below the best.
RUNS = [Probe(4, Outcome.OK, 400.0), Probe(12, Outcome.OK, 1500.0),
        Probe(13, Outcome.OK, 1490.0), Probe(14, Outcome.OOM, None, alloc_gb=2.0)]


def test_the_step_time_bound_settles_a_gap_the_trend_leaves_open() -> None:
    """Before the bound, 5..11 was probed (the trend alone allows +4.7% there)."""
    assert next_probe(batch_space(14), RUNS) is None
    why = why_not_run(batch_space(14), RUNS, [8])[8]
    assert why is not None
    check_golden_cases(GOLDEN / "model_perf_step_time" / "step_time_bound.txt", {"8": why})
    assert upper_bound(batch_space(14), RUNS, up_to=13) == 1500.0


def test_the_bound_is_for_the_batch_only() -> None:
    """Given values of another parameter are not the work per step: no such bound, so the
    gap is probed."""
    other = SearchSpace(tuple(range(1, 15)), None)
    step = next_probe(other, RUNS)
    assert step is not None and 4 < int(step.value) < 12


def test_the_bound_allows_for_noise_on_its_run() -> None:
    """A run at 4 whose TGS times 11/4 is within 2% of what the best needs to be beaten
    by leaves the gap open: one noisy run does not settle it."""
    close = [Probe(4, Outcome.OK, 1500.0 * 1.005 * 4 / 11 / 1.01), *RUNS[1:]]
    step = next_probe(batch_space(14), close)
    assert step is not None and 4 < int(step.value) < 12


def test_on_a_flat_floor_under_a_too_slow_value_the_bottom_goes_first() -> None:
    """Issue 22's family: past a steep fall, 13 and 25 measure flat and 37 hung (too slow).
    Before: the gap between 13 and 25 was bisected (each run there as slow as a pass gets)
    before the bottom, where the peak is. Now the bottom goes first, and a higher TGS found
    there settles 14..24 by step time."""
    floor = [Probe(25, Outcome.OK, 100.0), Probe(37, Outcome.SLOW, None),
             Probe(13, Outcome.OK, 100.5)]
    step = next_probe(batch_space(40), floor)
    assert step is not None and int(step.value) < 13, step
    assert "below first" in step.why and "floor of a steep fall" in step.why
    found = [*floor, Probe(6, Outcome.OK, 900.0), Probe(3, Outcome.OK, 1000.0)]
    seen = list(found)
    while (step := next_probe(batch_space(40), seen)) is not None and len(seen) < 12:
        assert not 13 < int(step.value) < 25, step   # the floor's gap is settled
        seen.append(Probe(step.value, Outcome.OK, 1000.0 - 40 * abs(int(step.value) - 3)))


def test_a_flat_floor_below_the_highest_pass_goes_below_before_toward_the_hang() -> None:
    """The same floor with the higher TGS at 25: before, the gap above the highest pass
    came first and the search walked toward the hang at 37 (31, 28 hung in turn)."""
    floor = [Probe(25, Outcome.OK, 100.5), Probe(37, Outcome.SLOW, None),
             Probe(13, Outcome.OK, 100.0)]
    step = next_probe(batch_space(40), floor)
    assert step is not None and int(step.value) < 13, step
    check_golden_cases(GOLDEN / "model_perf_step_time" / "flat_floor_below.txt",
                       {"step": step.why})


def test_a_floor_measured_two_percent_apart_is_flat() -> None:
    """Two runs each carry the noise, so their difference reaches twice it: the floor at 13
    and 25 measured 1.8% apart (the held-out steep-interior curve at 0.8% noise) is still
    flat. Before, only 1% counted as flat: the search walked toward the hang at 37 (31 and
    28 hung, 1 node-hour each) and never ran below 13, where the peak (2) was."""
    for floor in ([Probe(25, Outcome.OK, 100.0), Probe(37, Outcome.SLOW, None),
                   Probe(13, Outcome.OK, 101.8)],
                  [Probe(25, Outcome.OK, 101.8), Probe(37, Outcome.SLOW, None),
                   Probe(13, Outcome.OK, 100.0)]):
        step = next_probe(batch_space(40), floor)
        assert step is not None and int(step.value) < 13, (floor, step)
        assert "below first" in step.why


def test_a_fall_beyond_two_runs_noise_is_not_a_floor() -> None:
    """3% apart is a trend, not noise: no floor rule, the bottom is bounded by the secant."""
    falling = [Probe(25, Outcome.OK, 100.0), Probe(37, Outcome.SLOW, None),
               Probe(13, Outcome.OK, 103.0)]
    step = next_probe(batch_space(40), falling)
    assert step is None or "floor of a steep fall" not in step.why
