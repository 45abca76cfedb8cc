"""What a two-parameter verdict says of a setting it settled: the runs it rests on counted
as they are (one run, not "1 runs"), and a batch search named only where one ran (red team
t02: "remat_policy=full: settled with 1 runs: its batch search converged" after one run at
the best batch, the first policy's runs standing in for the rest)."""

from __future__ import annotations

from sweepd.kinds.model_perf.search import batch_space
from sweepd.kinds.model_perf.two_param.grid import next_pair, settled_notes
from sweepd.kinds.model_perf.two_param.pairs import Pair
from tests.golden_files import GOLDEN, check_golden_cases
from tests.support.two_param import run_shaped

SAID = GOLDEN / "model_perf_two_param"


def test_a_policy_settled_on_the_first_policy_s_runs_says_so() -> None:
    # full fits a little more than minimal_flash (34 of 30): within the first policy's reach,
    # so its runs stand in for full's (far past it, full is read at its own peak).
    policies = {"minimal_flash": (1.0, 1.0, 22.0), "full": (0.9, 0.39, 22.0)}
    space = batch_space(24)
    pairs: list[Pair] = []
    while (step := next_pair(space, "remat_policy", list(policies), pairs,
                             runs_left=20 - len(pairs))) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, run_shaped(*policies[str(step.second)], step.value)))
        assert len(pairs) < 20
    assert [p.value for s, p in pairs if s == "full"] == [22]
    notes = settled_notes(space, "remat_policy", list(policies), pairs)
    assert "batch search converged" not in notes["full"]
    # One run of full, the first policy's standing in; the first policy's own search did
    # run, and says how many runs it took.
    ran = sum(1 for s, _ in pairs if s == "minimal_flash")
    assert f"settled with {ran} runs" in notes["minimal_flash"]
    check_golden_cases(SAID / "settled_wording.txt", {s: notes[s] for s in policies})
