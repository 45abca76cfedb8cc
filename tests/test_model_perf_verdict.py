"""Model perf verdicts as structures: for given runs, the rule that decided, the value, its
TGS (and range, where it ran twice) and the kinds of caveats, not their prose (which
tests/test_verdict_golden.py holds)."""

from __future__ import annotations

from sweepd.kinds.model_perf.rules import BEST_SO_FAR, NO_PASS, OPTIMUM
from sweepd.kinds.model_perf.verdict import Caveat, CaveatKind, Verdict, summary
from tests.golden_files import GOLDEN, check_golden_cases
from tests.verdict_cases import (
    at_the_edge,
    cut_by_the_budget,
    earlier_curve_moved,
    flat_top,
    from_an_earlier_sweep,
    nothing_fits,
    on_fewer_nodes,
    run_twice,
    two_settings,
)

K = CaveatKind


def _kinds(verdict: dict[str, object]) -> list[str]:
    caveats = verdict["caveats"]
    assert isinstance(caveats, list)
    return [c["kind"] for c in caveats]


def test_a_best_at_the_edge_carries_its_edge_and_what_was_not_run() -> None:
    done = at_the_edge()
    assert done.rule == OPTIMUM.id and done.verdict["rule"] == OPTIMUM.id
    assert (done.verdict["best"], done.verdict["tgs"]) == (12, 1200.0)
    assert _kinds(done.verdict) == [K.EDGE, K.UNGIVEN, K.NOT_RUN]
    assert done.verdict["tgs_range"] is None


def test_the_stored_caveats_are_the_verdict_lines_text_in_parts() -> None:
    for case in (at_the_edge, cut_by_the_budget, flat_top, from_an_earlier_sweep, two_settings):
        done = case()
        texts = [c["text"] for c in done.verdict["caveats"]]
        assert "; ".join(texts) == done.verdict["caveat"]
        assert done.summary.endswith("; " + done.verdict["caveat"])


def test_a_budget_cut_names_the_budget_and_the_next_value_as_data() -> None:
    done = cut_by_the_budget()
    assert done.rule == BEST_SO_FAR.id and not done.verdict["settled"]
    assert _kinds(done.verdict) == [K.BUDGET, K.GAP, K.NOT_RUN]
    budget = done.verdict["caveats"][0]
    assert (budget["max_runs"], budget["next"]) == (5, 12)


def test_fewer_nodes_is_said_in_the_line_not_as_a_caveat() -> None:
    done = on_fewer_nodes()
    assert K.EDGE in _kinds(done.verdict) and done.verdict["nodes"] == 3
    assert "on 3 of the 4 pinned nodes" in done.summary


def test_rivals_within_the_noise_are_a_flat_top() -> None:
    assert _kinds(flat_top().verdict)[-1] == K.FLAT_TOP


def test_no_pass_is_its_rule_with_no_caveats() -> None:
    done = nothing_fits()
    assert not done.ok and done.rule == NO_PASS.id and done.verdict["best"] is None


def test_a_value_run_twice_gives_the_range_its_runs_spanned() -> None:
    done = run_twice()
    assert done.verdict["tgs"] == 1005.0 and done.verdict["tgs_range"] == [1000.0, 1010.0]


def test_an_earlier_sweep_is_a_caveat_that_names_it() -> None:
    used = from_an_earlier_sweep()
    assert K.EARLIER_SWEEP in _kinds(used.verdict) and K.PRIOR_DROPPED not in _kinds(used.verdict)
    assert [c["sweep"] for c in used.verdict["caveats"] if c["kind"] == K.EARLIER_SWEEP] == [7]
    dropped = earlier_curve_moved()
    assert _kinds(dropped.verdict) == [K.PRIOR_DROPPED]


def test_a_two_parameter_verdict_has_one_caveat_per_setting() -> None:
    done = two_settings()
    assert done.rule == OPTIMUM.id
    assert (done.verdict["best"], done.verdict["second_best"]) == (8, "minimal")
    assert _kinds(done.verdict) == [K.SETTING, K.SETTING]
    assert [c["second"] for c in done.verdict["caveats"]] == ["full", "minimal"]


def test_the_renderer_is_the_one_line_for_a_verdict_built_by_hand() -> None:
    v = Verdict(BEST_SO_FAR.id, "m", "per_device_batch_size", 8, 1234.5, 1, settled=False,
                caveats=(Caveat(K.NOISE, "noisy"), Caveat(K.QUIET, "quiet")), nodes=2, pinned=4)
    assert v.kinds() == (K.NOISE, K.QUIET)
    check_golden_cases(GOLDEN / "model_perf_verdict" / "by_hand.txt", {
        "best so far on fewer nodes": summary(v),
        "optimum": summary(Verdict(OPTIMUM.id, "m", "b", 8, 10.0, 2))})
