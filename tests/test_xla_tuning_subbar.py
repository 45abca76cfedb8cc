"""Issue 43: honest below-the-bar proposals at the 8 h stop (the report block before the
leader's last needs; the selecting runs' figure labelled with the bench's overstatement), and
a numeric family's value chosen on its runs (a rival value re-run at few runs)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import REPORT, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import Verdict, VerdictKind, plan, profiles
from sweepd.kinds.xla_tuning.verdict.structure import Decided, GainSource
from sweepd.kinds.xla_tuning.verdict.verdict_claim import SELECTING_OVERSTATE
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from tests.golden_files import GOLDEN, check_golden_cases

EV = Evidence(((Cost.ALL_GATHER, 0.4), (Cost.COMPUTE, 0.5)), "job 1002 HLO")
STEP = 2500.0  # queue seconds a run: 11 runs are 7.6 h, 2 more start before 8 h


def _inputs() -> Inputs:
    par = Parallelism.parse("FSDP=8")
    return Inputs(par, default_catalog(par), tags=("sparse", "dense"), drift=DriftRead.MEAN)


def _ok(profile: str, tgs: float, wave: int = 2, tag: str = "sparse",
        rule: str = "") -> Result:
    return Result(profile, tag, Outcome.OK, tgs, 28.0, queue_s=STEP, wave=wave, rule=rule)


def _sub_bar(extra: int = 0) -> list[Result]:
    """A +3.5 % single confirmed on two fresh runs, Wave 6 not run on dense, `extra` more
    catalog runs before it (each run STEP seconds of queue time)."""
    return [*(_ok("baseline", 1000.0, 1) for _ in range(3)), _ok("baseline", 1100.0, 1, "dense"),
            _ok("evidence", 990.0, 1), *(_ok("ovl2", 1001.0, 2) for _ in range(extra)),
            _ok("ag768M", 1040.0, 2), _ok("ag768M", 1035.0, 3, rule="noise.confirm"),
            _ok("ag768M", 1034.0, 3, rule="noise.confirm")]


def test_the_report_block_goes_before_needs_the_runs_left_cannot_also_hold() -> None:
    # 8 runs of 2500 s: 4 runs left, Wave 6's on dense and the block's 4 do not both fit.
    # Before: the runs went to Wave 6 and the timebox verdict read +3.45 % on the runs that
    # had selected the recipe; now the block is run, and the verdict reads it.
    results = _sub_bar(extra=0)
    step = plan(_inputs(), results, EV)
    assert not isinstance(step, Verdict)
    assert [p.rule for p in step] == [REPORT] * 4, step
    assert [p.profile.name for p in step] == ["ag768M", "baseline"] * 2
    assert "too few for its" in step[0].reason
    block = [_ok(p.profile.name, 1030.0 if p.profile.name == "ag768M" else 1000.0, 4,
                 rule=REPORT) for p in step]
    v = plan(_inputs(), [*results, *block, _ok("ovl4", 1000.0, 5)], EV)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.TIMEBOX, v
    assert v.recipe == "ag768M" and abs((v.gain or 0) - 0.03) < 1e-9
    assert isinstance(v, Decided) and v.said.gain is not None
    assert v.said.gain.source is GainSource.REPORT_BLOCK   # read on the block's runs
    assert v.conditional and "Wave 6 not run on dense" in v.conditional_reason


def test_needs_and_block_that_both_fit_keep_their_order() -> None:
    # Far from the stop nothing changes: Wave 6 first (the block follows once nothing is
    # needed).
    results = [*_sub_bar()]
    far = [Result(r.profile, r.tag, r.outcome, r.tgs, r.step_s, queue_s=600.0, wave=r.wave,
                  rule=r.rule) for r in results]
    step = plan(_inputs(), far, EV)
    assert not isinstance(step, Verdict) and REPORT not in {p.rule for p in step}


def test_a_figure_read_on_the_selecting_runs_says_how_far_such_figures_overstate() -> None:
    # Only one run left: no block can finish; the verdict says whose figure it is and the
    # bench's measured overstatement of such figures.
    results = [*_sub_bar(extra=2), _ok("ovl4", 1000.0, 4)]
    v = plan(_inputs(), [*results, _ok("ovl8", 1000.0, 5)], EV)
    assert isinstance(v, Verdict) and v.recipe == "ag768M", v
    assert "which also put it forward" in v.reason
    assert f"{100 * SELECTING_OVERSTATE:+.1f} points" in v.reason
    check_golden_cases(GOLDEN / "xla_subbar" / "selecting_overstate.txt", {"verdict": v.reason})


def test_a_leader_its_runs_together_put_above_2_percent_gets_the_block_too() -> None:
    # +3.5 % over three runs that kept it in front, none fresh: before, the last runs went to
    # its confirmation and Wave 6 and the 8 h stop said "no change" on the one fresh run;
    # now its block is made, and the verdict names it on those runs (conditional), where
    # they hold it significantly above +2 %.
    results = [*(_ok("baseline", 1000.0, 1) for _ in range(3)),
               _ok("baseline", 1100.0, 1, "dense"), _ok("evidence", 990.0, 1),
               _ok("ag768M", 1040.0, 2), _ok("ag768M", 1033.0, 3, rule="noise.rerun"),
               _ok("ag768M", 1032.0, 3, rule="noise.rerun")]
    step = plan(_inputs(), results, EV)
    assert not isinstance(step, Verdict)
    assert [p.rule for p in step] == [REPORT] * 4, step
    block = [_ok(p.profile.name, 1040.0 if p.profile.name == "ag768M" else 1000.0, 4,
                 rule=REPORT) for p in step]
    v = plan(_inputs(), [*results, *block, _ok("ovl4", 1000.0, 5)], EV)
    assert isinstance(v, Verdict) and v.recipe == "ag768M", v
    assert abs((v.gain or 0) - 0.04) < 1e-9 and "which decided nothing" in v.reason
    assert v.conditional and "confirmed on 0 fresh run(s)" in v.conditional_reason


def test_a_leader_at_the_win_bar_keeps_its_confirmation_first() -> None:
    # +6 %: its confirmation may make the winner rule's stop; no block goes before it.
    results = [*(_ok("baseline", 1000.0, 1) for _ in range(3)),
               _ok("baseline", 1100.0, 1, "dense"), _ok("evidence", 990.0, 1),
               _ok("ag768M", 1060.0, 2), _ok("ag768M", 1062.0, 3, rule="noise.rerun"),
               _ok("ag768M", 1061.0, 3, rule="noise.rerun")]
    step = plan(_inputs(), results, EV)
    assert not isinstance(step, Verdict) and REPORT not in {p.rule for p in step}, step


def _family_board(ovl8: float) -> Candidates:
    """PP=8 at 880 s a run (few runs): overlap limit 2 at +3.4 % over two runs, limit 8 run
    once at `ovl8`."""
    par = Parallelism.parse("PP=8")
    inp = Inputs(par, default_catalog(par), tags=("sparse",), drift=DriftRead.MEAN)
    res = [*(Result("baseline", "sparse", Outcome.OK, 1000.0, 28.0, queue_s=880.0, wave=1)
             for _ in range(3)),
           Result("evidence", "sparse", Outcome.OK, 990.0, 28.0, queue_s=880.0, wave=1),
           *(Result("ovl2", "sparse", Outcome.OK, t, 28.0, queue_s=880.0, wave=2)
             for t in (1035.0, 1033.0)),
           Result("ovl8", "sparse", Outcome.OK, ovl8, 28.0, queue_s=880.0, wave=3)]
    board = build(res, inp.noise, inp.max_flakes, inp.drift)
    return Candidates(inp, board, EV, profiles(inp))


def test_a_family_value_within_noise_of_its_best_is_re_run_at_few_runs() -> None:
    # Issue 43: limit 8 read once at +3.0 %, within noise of limit 2's +3.4 % over two runs.
    # Before, at few runs a contender that cannot reach +5 % was not re-run, and the value
    # the stacks and the verdict took was whichever read high first; now the family's
    # values are compared on more than one run each.
    rerun = {p.name: why for p, _, _, why in _family_board(1030.0).steps.confirmations()}
    assert "ovl8" in rerun and "within 2 se of ovl2" in rerun["ovl8"]
    # Clearly below the family's best: not re-run (the rule is about which value, not noise).
    assert "ovl8" not in {p.name for p, *_ in _family_board(1005.0).steps.confirmations()}
