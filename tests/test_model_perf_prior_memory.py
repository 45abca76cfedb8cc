"""An earlier sweep of the same cell whose runs agree on TGS but whose compiled-memory
lines are another program's (red team p11: memory per batch dropped, 30 -> 40 fits)."""

from dataclasses import replace

from sweepd.kinds.model_perf.edges import best_at_edge
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    flat_top,
    prior_memory_moved,
)
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from tests.golden_files import GOLDEN, check_golden_cases
from tests.model_perf_curves import sweep_curve

SAID = GOLDEN / "model_perf_prior_memory"

FIXED_GB, POOL_GB = 7.0, 178.6


def rising(b: int) -> float:
    """The truth: still rising at 40, the largest batch that fits now."""
    return round(1400.0 * (1 - ((60 - b) / 60) ** 2))


def earlier_sweep(temp_gb_per_batch: float) -> SearchSpace:
    """Sweep #1 ran 4, 30 and 28 and stopped at its largest fit, 30; this sweep starts at
    its peak, 30, with its runs standing in."""
    earlier = tuple(Probe(b, Outcome.OK, rising(b), temp_gb=round(temp_gb_per_batch * b, 1),
                          fixed_gb=FIXED_GB, limit_gb=POOL_GB) for b in (4, 30, 28))
    return replace(batch_space(30), start=30, start_why="at the earlier peak", prior=earlier)


def test_an_earlier_sweeps_memory_lines_that_disagree_here_are_not_fitted() -> None:
    """p11: at 30 this sweep compiled 126.3 GB temp, sweep #1 167.7 GB (25 % apart); the
    TGS agreed, so its runs stood in with their memory lines, and the line fitted over both
    programs predicted ~38.6: the search stopped at 38 (37 named, 4.6 % slow) as a flat top.
    Its TGS still stands in; its memory lines are not fitted, and the search reaches 40."""
    space = earlier_sweep(5.59)
    found, probes, whys = sweep_curve(space, rising, 40, 4.21, FIXED_GB, POOL_GB, 12)
    assert found == 40
    moved = prior_memory_moved(space, probes[:1])
    assert moved is not None and moved.value == 30
    assert moved.mine == (126.3, FIXED_GB) and moved.before == (167.7, FIXED_GB)
    assert "temp fitted over" not in whys[1]
    moved_why = whys[1]
    # Within the rounding and a few %, the same program: its lines are fitted with this
    # sweep's (the search starts from four points, not one).
    same = earlier_sweep(4.25)
    assert prior_memory_moved(same, probes[:1]) is None
    _, _, whys = sweep_curve(same, rising, 40, 4.21, FIXED_GB, POOL_GB, 12)
    # Moved: this sweep's one line (temp 126.3 GB at 30); the same: fitted over 4, 28, 30.
    check_golden_cases(SAID / "second_step.txt", {"moved": moved_why, "the same": whys[1]})


def spec() -> ModelPerfSpec:
    parsed = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]"})
    assert isinstance(parsed, ModelPerfSpec)
    return parsed


def test_a_flat_top_at_the_largest_run_names_that_nothing_above_it_ran() -> None:
    """p11's verdict: 37 best, 38 (the largest run) within the noise of it, and the memory
    line ruled out 39: "flat top" on a curve still rising, with no word that nothing above
    38 ran. The edge note covered only a best that is itself the largest run."""
    def memory(b: int) -> dict[str, float]:
        return {"temp_gb": round(4.5 * b, 1), "fixed_gb": FIXED_GB, "limit_gb": POOL_GB}

    space = batch_space(30)
    runs = [Probe(b, Outcome.OK, t, **memory(b))
            for b, t in ((30, 914.0), (35, 1006.0), (37, 1061.0), (38, 1058.0))]
    assert flat_top(space, runs) is not None
    note = best_at_edge(spec(), space, runs)
    assert note is not None
    check_golden_cases(SAID / "edge_note.txt", {"nothing above 38": note})
    # 38 told apart from the best (beyond the noise): the best is not at the edge.
    apart = [*runs[:3], Probe(38, Outcome.OK, 1000.0, **memory(38))]
    assert best_at_edge(spec(), space, apart) is None
