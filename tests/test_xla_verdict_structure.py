"""An xla-tuning verdict is a structure (issue 42 item 2): the rule that decided, the
outcome, the recipe and its flags, the gain with its interval, the runs behind it and
whether they selected it, and typed caveats; built once where the verdict is decided,
stored beside its prose (older verdicts stay readable), and rendered by one renderer.
The cases are real sweeps (tests/xla_verdict_cases.py); their prose is held by
tests/test_xla_verdict_golden.py."""

from __future__ import annotations

import pytest

from sweepd.kinds.xla_tuning.reporting.report_sections import verdict_prose
from sweepd.kinds.xla_tuning.verdict import render
from sweepd.kinds.xla_tuning.verdict.structure import (
    CaveatKind,
    Conclusion,
    GainSource,
    Outcome,
    from_stored,
)
from sweepd.kinds.xla_tuning.verdict.verdict_claim import SELECTING_OVERSTATE
from sweepd.kinds.xla_tuning.waves.planned import VerdictKind
from tests.golden_files import GOLDEN, check_golden_cases
from tests.xla_verdict_cases import (
    CASES,
    bounded,
    demo,
    max_runs,
    restore_oom,
    sub_bar_block,
    sub_bar_selecting,
    timebox,
)

K = CaveatKind


def _data(c: Conclusion, kind: CaveatKind) -> dict[str, object]:
    (found,) = [x for x in c.caveats if x.kind is kind]
    return dict(found.data)


def test_the_demo_deploys_its_winner_on_runs_that_did_not_select_it() -> None:
    c = demo().said
    assert (c.rule, c.kind, c.outcome) == ("stop.winner", VerdictKind.PROPOSAL, Outcome.DEPLOY)
    assert c.recipe is not None and c.recipe.name == "ag768M"
    assert c.recipe.flags == "--xla_gpu_all_gather_combine_threshold_bytes=805306368"
    assert c.win and not c.conditional
    g = c.gain
    assert g is not None and g.source is GainSource.REPORT_BLOCK and not g.selected
    assert (g.n, g.baseline_n) == (2, 2) and g.interval[0] < g.value < g.interval[1]
    assert g.value > 0.05 and g.decided is not None and g.held
    assert c.kinds() == (K.IN_EFFECT,) and _data(c, K.IN_EFFECT) == {"profiles": ["lhs"]}


def test_a_bounded_stop_names_no_recipe_and_its_family_gaps() -> None:
    c = bounded().said
    assert (c.rule, c.kind, c.outcome) == ("stop.bounded", VerdictKind.BOUNDED,
                                           Outcome.BOUNDED)
    assert c.recipe is None and c.gain is None and c.profiles >= 25
    assert c.kinds() == (K.FAMILY_GAPS,) and _data(c, K.FAMILY_GAPS) == {"family_gaps": True}


def test_the_8h_stop_with_nothing_above_the_bar_is_no_change_with_what_it_left_open() -> None:
    c = timebox().said
    assert (c.rule, c.kind, c.outcome) == ("stop.timebox", VerdictKind.TIMEBOX,
                                           Outcome.NO_CHANGE)
    assert c.recipe is None and c.gain is None
    assert c.kinds() == (K.OUT_OF_REACH, K.ONE_RUN_LEAD, K.UNTRIED)
    assert _data(c, K.OUT_OF_REACH)["unreachable"] is True
    assert _data(c, K.ONE_RUN_LEAD)["profile"] == "fast"


def test_a_max_runs_stop_is_its_own_rule() -> None:
    c = max_runs().said
    assert (c.rule, c.kind, c.outcome) == ("stop.max_runs", VerdictKind.TIMEBOX,
                                           Outcome.NO_CHANGE)
    check_golden_cases(GOLDEN / "xla_verdict_structure" / "max_runs_statement.txt", {
        "statement": c.statement})
    assert c.kinds() == (K.OUT_OF_REACH, K.UNTRIED, K.NO_COLLECTIVES, K.QUIET)
    assert _data(c, K.OUT_OF_REACH)["unreachable"] is False
    # One chip: the collective families were not run, on its evidence run's HLO dump.
    left = _data(c, K.NO_COLLECTIVES)
    assert left["rule"] == "catalog.no_collectives"
    assert set(left["profiles"]) == {"acf", "acfag", "occ", "dpar", "aag"}
    # The simulated TPU chip's runs agree within 0.03 % (rule verdict.quiet).
    quiet = _data(c, K.QUIET)
    assert 0.0001 < float(quiet["measured"]) < 0.0006 and quiet["between"] is None


def test_a_sub_bar_proposal_read_on_its_selecting_runs_says_they_overstate() -> None:
    c = sub_bar_selecting().said
    assert (c.rule, c.outcome) == ("stop.timebox", Outcome.BELOW_WIN) and not c.win
    assert c.recipe is not None and c.recipe.name == "ag768M"
    g = c.gain
    assert g is not None and g.source is GainSource.FRESH_PUT_FORWARD and g.selected
    assert g.n == 2 and g.value == pytest.approx(0.0345)
    # Its runs, written by hand, agree within 0.2 %: a quarter of the rules' 0.8 %.
    assert c.kinds() == (K.SELECTING_OVERSTATE, K.WAVE6_NOT_RUN, K.IN_EFFECT, K.QUIET)
    assert _data(c, K.SELECTING_OVERSTATE) == {"overstate": SELECTING_OVERSTATE}
    assert c.conditional and [n.kind for n in c.needs()] == [K.WAVE6_NOT_RUN]
    assert _data(c, K.WAVE6_NOT_RUN) == {"tags": ["dense"]}


def test_a_sub_bar_proposal_read_on_its_block_did_not_select_it() -> None:
    c = sub_bar_block().said
    assert c.outcome is Outcome.BELOW_WIN
    g = c.gain
    assert g is not None and g.source is GainSource.REPORT_BLOCK and not g.selected
    assert g.value == pytest.approx(0.04) and g.decided == pytest.approx(0.035)
    assert [n.kind for n in c.needs()] == [K.FEW_FRESH, K.WAVE6_NOT_RUN]
    assert _data(c, K.FEW_FRESH) == {"fresh": 0, "needed": 2}


def test_a_restore_default_out_of_memory_is_a_typed_caveat() -> None:
    c = restore_oom().said
    assert c.outcome is Outcome.NO_CHANGE and not c.conditional
    assert c.kinds()[-2:] == (K.RESTORE_DROPPED, K.QUIET)   # runs written within 0.05 %
    d = _data(c, K.RESTORE_DROPPED)
    assert d["tag"] == "sparse" and d["detail"] == "allocation of 3.1 GiB"


@pytest.mark.parametrize("name", ["demo_winner", "bounded", "timebox", "max_runs"])
def test_the_stored_structure_renders_the_stored_prose(name: str) -> None:
    case = CASES[name]()
    v = case.verdict
    assert v is not None
    # One renderer: the line every reader shows, the tuning report's verdict and what a
    # deployment still needs all come from the structure the store holds.
    assert render.summary(case.said) == case.summary
    assert render.reason(case.said) == v["reason"] == verdict_prose(v)
    assert v["conditional_reason"] == "; ".join(n.text for n in case.said.needs())
    assert (v["outcome"], v["rule"]) == (str(case.said.outcome), case.said.rule)
    assert [c["kind"] for c in v["caveats"]] == [str(k) for k in case.said.kinds()]


def test_a_verdict_stored_before_the_structure_is_read_as_its_prose() -> None:
    v = dict(demo().verdict or {})
    for key in ("outcome", "statement", "gain_source", "gain_selected", "gain_detail",
                "flags", "flags_var", "tested", "bars", "caveats"):
        del v[key]
    assert from_stored(v) is None
    assert verdict_prose(v) == v["reason"]
    assert verdict_prose({}) == ""
