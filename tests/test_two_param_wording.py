"""What a two-parameter verdict says of a setting it settled: the runs it rests on counted
as they are (one run, not "1 runs"), and a batch search named only where one ran (red team
t02: "remat_policy=full: settled with 1 runs: its batch search converged" after one run at
the best batch, the first policy's runs standing in for the rest)."""

from __future__ import annotations

from sweepd.kinds.model_perf.search import batch_space
from sweepd.kinds.model_perf.two_param.grid import next_pair, settled_notes
from sweepd.kinds.model_perf.two_param.pairs import Pair
from tests.test_model_perf_two_param import _run_shaped


def test_a_policy_settled_on_the_first_policy_s_runs_says_so() -> None:
    # full fits a little more than minimal_flash (34 of 30): within the first policy's reach,
    # so its runs stand in for full's (far past it, full is read at its own peak).
    policies = {"minimal_flash": (1.0, 1.0, 22.0), "full": (0.9, 0.39, 22.0)}
    space = batch_space(24)
    pairs: list[Pair] = []
    while (step := next_pair(space, "remat_policy", list(policies), pairs,
                             runs_left=20 - len(pairs))) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, _run_shaped(*policies[str(step.second)], step.value)))
        assert len(pairs) < 20
    assert [p.value for s, p in pairs if s == "full"] == [22]
    notes = settled_notes(space, "remat_policy", list(policies), pairs)
    assert notes["full"].startswith("settled with 1 run: remat_policy=minimal_flash's runs")
    assert "stood in for the batches it did not run" in notes["full"]
    assert "batch search converged" not in notes["full"]
    # The first policy's own search did run, and says how many runs it took.
    ran = sum(1 for s, _ in pairs if s == "minimal_flash")
    assert notes["minimal_flash"] == f"settled with {ran} runs: its batch search converged"
