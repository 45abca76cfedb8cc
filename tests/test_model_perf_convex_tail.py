"""A steep fall that flattens past the peak (red team y12, and the simulator's default curve
with its peak far below the largest fit): the runs past the best fall less steeply the
farther out they are, so the curve is convex there. Before, the secant through two runs on
that flat tail, extended to the gap beside the best, "settled" it (the valley lift adds
only the dip's depth): the search claimed an optimum 4-18 % slow in 4-5 runs, and the
verdict said nothing. A concave bound holds only where the curve is concave: across a
fall that flattens, only the best's own side bounds the gap, and the next run is a step
from the best.

The search's pure planner on a fixed curve (no noise), with MaxText's compiled-memory line:
4 GB of temp per batch, 20 GB fixed, a 82.6 GB pool, so batches up to 15 fit."""

from __future__ import annotations

from sweepd.kinds.api import Finished, SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    bent_beside_best,
    next_probe,
)
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from tests.golden_files import GOLDEN, check_golden_cases
from tests.model_perf_curves import passed_run, sweep_curve

LARGEST_FIT = 15
MAX_RUNS = 12
# Red team y12: the peak at 6, then a fall that flattens at 43 % (share of the peak TGS).
Y12 = (0.34128, 0.51728, 0.65975, 0.78405, 0.89638, 1.0, 0.77398, 0.63758, 0.55527, 0.5056,
       0.47562, 0.45753, 0.44661, 0.44003, 0.43605)


def y12(b: int) -> float:
    return round(1400.0 * Y12[b - 1])


def _sweep(estimate: int) -> tuple[int, list[int]]:
    found, probes, _ = sweep_curve(batch_space(estimate), y12, LARGEST_FIT, 4.0, 20.0, 82.6,
                                   MAX_RUNS)
    return found, [int(p.value) for p in probes]


def test_the_flat_tails_secant_does_not_settle_the_gap_beside_the_best() -> None:
    """The red team's runs: 4, 15, 5, 10 read 1104, 605, 1257, 716. The slope 5-10 (-108 a
    batch) is far steeper than 10-15 (-22): 10 lies 17 % of the best below the chord of 5
    and 15. Before, the line 10-15 extended to 6 (~804, +215 for the dip) settled 6..9 and
    the search stopped on 5; the truth at 6 is 1400. Now 6, beside the best, runs next."""
    runs = [Probe(4, Outcome.OK, 1104.0), Probe(15, Outcome.OK, 605.0),
            Probe(5, Outcome.OK, 1257.0), Probe(10, Outcome.OK, 716.0)]
    step = next_probe(batch_space(15), runs)
    assert step is not None and int(step.value) == 6, step
    assert "a fall that flattens" in step.why


def test_the_y12_curve_is_found_from_every_estimate() -> None:
    """Swept from estimates 4..24 (first probes 3..16), the search ends on the peak. Before,
    estimates 4 and 5 ended on 5 (10 % slow; the red team's run) and 19..24 on 4 (22 %
    slow: 8 and 14, 15 on the tail settled 5..7 below the secant through them)."""
    for estimate in range(4, 25):
        found, ran = _sweep(estimate)
        assert found == 6, (estimate, ran)
        assert len(ran) <= 9, (estimate, ran)


def test_the_bend_is_read_either_side_of_the_best() -> None:
    """The same runs mirrored, on a parameter whose values are not the work per step (no
    step-time bound): the rise that steepens toward the best is the fall that flattens
    read the other way, and the value beside the best runs next."""
    space = SearchSpace(tuple(range(1, 16)), None)
    runs = [Probe(12, Outcome.OK, 1104.0), Probe(1, Outcome.OK, 605.0),
            Probe(11, Outcome.OK, 1257.0), Probe(6, Outcome.OK, 716.0)]
    step = next_probe(space, runs)
    assert step is not None and int(step.value) == 10, step


def test_a_bend_read_as_tile_alignment_keeps_the_lifted_secants() -> None:
    """12 lies 4.5 % below the chord of 8 and 16 and TGS falls from 8 through 12 to 16:
    read alone, a fall that flattens. But 12 is off the multiples of 8 either side of it:
    the tile rule reads the runs as alignment (a bench curve: the peak at 8 a tile's
    spike), and its bend bounds nothing about a smooth fall. The next run is the seed's
    midpoint of 6..8, not a step from 8 toward 12."""
    runs = {16: 870.0, 30: 624.0, 19: 796.0, 8: 1011.0, 4: 937.0, 6: 982.0, 12: 895.0}
    step = next_probe(batch_space(41, upper=41), [Probe(b, Outcome.OK, t)
                                                  for b, t in runs.items()])
    assert step is not None and int(step.value) == 7, step
    assert "a fall that flattens" not in step.why


def test_a_valley_floor_keeps_the_lifted_secants() -> None:
    """10 lies below the chord of 5 and 15, but 15 rises past it again: a valley, not a
    fall that flattens. The seed's rule stands (every secant raised by the dip), and here
    it settles 6..9."""
    space = batch_space(15, lower=5, upper=15)
    runs = [Probe(5, Outcome.OK, 1257.0), Probe(10, Outcome.OK, 716.0),
            Probe(15, Outcome.OK, 800.0)]
    assert next_probe(space, runs) is None
    said = bent_beside_best(space, runs)
    assert said is not None
    check_golden_cases(GOLDEN / "model_perf_convex_tail" / "bent_beside_best.txt",
                       {"6..9": said})
    # A concave curve, no caveat: 10 on the chord of 5 and 15.
    assert bent_beside_best(space, [*runs[:1], Probe(10, Outcome.OK, 1030.0), *runs[2:]]) \
        is None


def test_the_verdict_says_the_curve_is_not_concave_beside_an_unrun_gap() -> None:
    """The search stops on 5 with 6..9 settled by the concave bound alone, on runs that
    show the curve is not concave: the verdict is the optimum, with that caveat. Before,
    it said "optimum" and nothing more."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "lower": 5, "upper": 15})
    assert isinstance(spec, ModelPerfSpec)
    runs = [passed_run(1, 5, 1257.0), passed_run(2, 10, 716.0), passed_run(3, 15, 800.0)]
    ctx = SweepContext(runs=runs, nodes=["chi1", "chi2", "chi3", "chi4"], gpu_memory_gib=192,
                       facts=PerfFacts())
    done = plan(spec, ctx)
    assert isinstance(done, Finished), done
    assert done.verdict["best"] == 5 and "optimum" in done.summary
    [bent] = [c["text"] for c in done.verdict["caveats"] if c["kind"] == "bent"]
    check_golden_cases(GOLDEN / "model_perf_convex_tail" / "verdict_not_concave.txt",
                       {"bent": bent})
