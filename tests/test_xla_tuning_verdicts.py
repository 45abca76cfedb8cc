"""Issue 21: right and honest xla-tuning verdicts (the seed's stop rules, claims from runs
that did not select the recipe, intervals, conditional verdicts, recipes of useful parts
only, a flat numeric family's ends, the bounded rule within 8 h)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import AG, default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Landscape
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import (
    Planned,
    Verdict,
    VerdictKind,
    confirmed_win,
    plan,
    profiles,
    pruned,
)
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from tests.golden_files import GOLDEN, check_golden_cases
from tests.support.xla_verdicts import EV, H8, _base, _inputs, _ok, _timeboxed


def _reasons(name: str, cases: dict[str, str]) -> None:
    """The verdicts' reasons a person reads, each whole, in one golden per test."""
    check_golden_cases(GOLDEN / "xla_tuning" / "verdicts" / f"{name}.txt", cases)


def test_the_claimed_gain_leaves_out_the_run_that_selected_the_recipe() -> None:
    # Selected on a lucky +9 % run; the two runs after it say +6 %: the claim is +6 %
    # (before: the mean of all three, +7 %, the winner's curse). (A +15 % selecting run
    # puts the cell's measured spread at 3.4 %, where +6 % is not significantly above +2 %.)
    # (report_runs 0: the SKILL.md's reading; with the block due and not run, the timebox
    # verdict says its gain was read on the runs that put it forward, below.)
    results = [*_base(), _ok("ag768M", 1090.0), _ok("ag768M", 1060.0, 3),
               _ok("ag768M", 1060.0, 4), _ok("ag768M", 1060.0, 4, "dense")]
    v = _timeboxed(results, replace(_inputs(fsdp8()), report_runs=0))
    assert v.recipe == "ag768M" and v.gain == pytest.approx(0.06) and v.n == 2
    assert v.interval is not None and v.interval[0] < 0.06 < v.interval[1]
    assert not v.conditional
    # The reason names the interval, the 2 runs after the selecting one, and the drift read.
    reasons = {"read against the trend": v.reason}
    mean = _timeboxed(results, replace(_inputs(fsdp8()), report_runs=0, drift=DriftRead.MEAN))
    assert mean.recipe == "ag768M" and "drift:" not in mean.reason  # the SKILL.md's reading
    # The block that measures a recipe apart is due (report_runs 2) and the 8 h stop came
    # first: its gain was read on the runs that put it forward, look after look (a flat
    # cell at 2.5 % noise named a +0.4 % recipe at +6.6 % so): the verdict says so.
    v = _timeboxed(results)
    assert v.recipe == "ag768M" and not v.conditional
    reasons["read on the runs that put it forward"] = v.reason
    _reasons("claimed_gain", reasons)


def test_one_lucky_run_above_2_percent_does_not_make_a_proposal() -> None:
    # A +3 % single run, +0.5 % on the runs after it: nothing significantly above +2 %.
    v = _timeboxed([*_base(), _ok("ag768M", 1030.0), _ok("ag768M", 1005.0, 3),
                    _ok("ag768M", 1004.0, 4)])
    assert v.recipe is None and v.gain is None
    assert v.kind is VerdictKind.TIMEBOX
    _reasons("one_lucky_run", {"no change, bounded so far": v.reason})


def test_a_recipe_above_2_percent_not_confirmed_at_5_is_proposed_as_such() -> None:
    v = _timeboxed([*_base(), _ok("ag768M", 1045.0), _ok("ag768M", 1040.0, 3),
                    _ok("ag768M", 1041.0, 4), _ok("ag768M", 1040.0, 4, "dense")])
    assert v.recipe == "ag768M" and v.gain == pytest.approx(0.0405)
    assert not v.win
    _reasons("above_2_not_5", {"proposed, not confirmed >= +5%": v.reason})


def test_a_timebox_verdict_without_wave6_is_conditional() -> None:
    v = _timeboxed([*_base(), _ok("ag768M", 1100.0), _ok("ag768M", 1100.0, 3),
                    _ok("ag768M", 1100.0, 4)])
    assert v.recipe == "ag768M" and v.conditional
    assert "Wave 6 not run on dense" in v.conditional_reason


def test_a_part_with_no_measured_help_is_left_out() -> None:
    # ag768M+lhs measured no faster than ag768M alone (+0.1 %, within a standard error): the
    # gap is ambiguous, so both are run again first; at 4 runs each lhs is left out, and said.
    runs = [*_base(), _ok("ag768M", 1100.0), _ok("ag768M", 1100.0, 3), _ok("ag768M", 1100.0, 3),
            _ok("ag768M", 1100.0, 4, "dense"), _ok("ag768M+lhs", 1101.0, 3),
            _ok("ag768M+lhs", 1101.0, 4), _ok("ag768M+lhs", 1101.0, 4)]
    step = plan(_inputs(fsdp8()), runs, EV)
    assert isinstance(step, tuple)
    assert {p.profile.name for p in step if p.rule == "verdict.part_check"} >= {"ag768M"}
    runs += [_ok("ag768M", 1100.0, 5), _ok("ag768M+lhs", 1101.0, 5), _ok("ag768M", 1100.0, 5),
             _ok("ag768M+lhs", 1101.0, 5)]
    v = plan(_inputs(fsdp8(), report_runs=0), runs, EV)  # the parts, not the report block
    assert isinstance(v, Verdict) and v.rule == "stop.winner" and v.recipe == "ag768M", v
    assert v.left_out and v.left_out[0].startswith("lhs (")
    _reasons("part_left_out", {"left out at the 4-run cap": v.reason})


def test_a_part_never_tested_without_the_rest_is_tested_before_the_winner_stop() -> None:
    inp = _inputs(fsdp8())
    results = [*_base(), _ok("ag768M", 1100.0), _ok("lhs", 1010.0), _ok("mem95", 1010.0),
               _ok("ag768M+lhs+mem95", 1130.0, 3)]
    step = plan(inp, results, EV)
    assert isinstance(step, tuple)
    checks = {p.profile.name for p in step if p.rule == "verdict.part_check"}
    assert checks == {"ag768M+lhs", "ag768M+mem95", "lhs+mem95"}


def test_seed_mode_stops_on_a_confirmed_winner_after_wave6_thorough_runs_on() -> None:
    land = fsdp8()
    seed = replay(_inputs(land), land, random.Random(3))
    thorough = replay(_inputs(land, stop="thorough"), land, random.Random(3))
    assert seed.verdict.kind is VerdictKind.PROPOSAL and seed.verdict.rule == "stop.winner"
    assert not seed.verdict.conditional
    wave6 = [p for p in seed.planned if p.rule == "wave6.cross_tag"]
    assert wave6 and wave6[0].profile.name == seed.verdict.recipe and wave6[0].tag == "dense"
    assert len(seed.results) < 27 < len(thorough.results)
    # The claim is within noise of the recipe's true gain.
    true = land.gain(seed.settings(_inputs(land)), "sparse")
    assert true is not None and seed.verdict.interval is not None
    assert seed.verdict.interval[0] < true - 1 < seed.verdict.interval[1]


def _flat(spread: float) -> Landscape:
    land = fsdp8()
    rng = random.Random(0)
    par = Parallelism.parse("FSDP=8")
    effects = {s.label: Effect(tgs=1 + rng.uniform(-spread, spread))
               for p in default_catalog(par) for s in p.settings}
    return land.model_copy(update={"effects": effects, "tag_effects": {}, "interactions": (),
                                   "flake_rate": 0.0})


def test_the_bounded_rule_fires_within_8h_at_10_minute_jobs() -> None:
    land = _flat(0.006)  # the best flag +0.6 %, every run 0.8 % noise
    rules = []
    for seed in range(10):
        r = replay(_inputs(land), land, random.Random(seed))
        assert r.verdict.recipe is None, r.verdict
        assert len(r.results) <= 48  # 10 min a job: inside 8 h
        rules.append(r.verdict.rule)
        if r.verdict.kind is not VerdictKind.BOUNDED:
            # The one other ending: the stop came while a recipe's fresh run read above
            # +2 % (agrs384M +2.4 % on one, a late family value): "no change, bounded so
            # far", naming it (`bounded_question.py`), not "structurally bounded".
            assert r.verdict.kind is VerdictKind.TIMEBOX, r.verdict
            assert "not shown either way" in r.verdict.reason, r.verdict.reason
    # The seed's rule itself is reached: a catalog spent short of 25 profiles is filled
    # (flat families' ends, then pairs) before "catalog exhausted" may end it. Not when
    # the stop came before a stack the noise singles predict over +2 % could run
    # (`bounded_stack.py`: 31 -> 25 of 40 seeds bounded, the rest "no change" naming it).
    assert rules.count("stop.bounded") >= 7, rules


def test_the_8h_stop_reads_the_bounded_rule_on_what_was_run() -> None:
    """25 profiles, none significantly above +2 %: the SKILL.md's bounded rule is met
    even when the stop cuts off a re-run a last run set off (a contender within noise).
    It was a "timebox" verdict (a flat cell: 19-26 of 100 seeds); the rule is named, and
    what the stop cut off is said. Short of 25 profiles it stays the timebox's."""
    inp = _inputs(fsdp8())
    table = profiles(inp)
    # Every mechanism run at least once (nbuf: NCCL, mem95: memory).
    singles = ["nbuf", "mem95", *[p for p in table if "+" not in p and p not in (
        "baseline", "evidence", "restore_default", "lhs", "nbuf", "mem95")][:24]]
    flat = [_ok(p, 1000.0 + (i % 3)) for i, p in enumerate(singles[:25])]
    contender = [_ok(singles[25], 1012.0, 4)]   # one run at +1.2 %: re-run as a contender
    # Jobs of ~11 minutes: 8 h hold 42 runs (under 40, `wave_rules.few_runs`, a contender
    # that cannot reach +5 % is not re-run, and none is cut off).
    ran = [*_base(13), *flat, *contender]
    results = [*ran, _ok("lhs", 1000.0, 5, queue_s=H8 - 600.0 * len(ran))]
    v = plan(inp, results, EV)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.BOUNDED, v
    assert v.rule == "stop.bounded" and v.recipe is None
    assert v.reason.startswith("27 distinct profiles")
    _reasons("bounded_at_8h", {f"the stop before {singles[25]}": v.reason})
    few = [*_base(), *flat[:20], _ok("lhs", 1000.0, 5, queue_s=H8)]
    assert _timeboxed(few).kind is VerdictKind.TIMEBOX


def test_the_8h_stop_is_no_bounded_verdict_with_a_contender_or_a_mechanism_unrun() -> None:
    """Red team: a +7 % one-run reading cut off by the stop, or a whole mechanism never
    run (the +7 % NCCL flag's), and the cell was called "structurally bounded": it is the
    timebox's "no change, bounded so far", naming what is unconfirmed."""
    inp = _inputs(fsdp8())
    table = profiles(inp)
    others = [p for p in table if "+" not in p and p not in (
        "baseline", "evidence", "restore_default", "lhs", "nbuf", "mem95")]
    flat = [_ok(p, 1000.0 + (i % 3)) for i, p in enumerate(["nbuf", "mem95", *others[:24]])]
    lucky = [*flat[:-1], _ok(others[23], 1070.0, 4)]  # one run at +7 %, cut off
    v = plan(inp, [*_base(), *lucky, _ok("lhs", 1000.0, 5, queue_s=H8)], EV)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.TIMEBOX, v
    assert v.recipe is None
    reasons = {f"{others[23]} one run at +7 %, cut off": v.reason}
    no_nccl = [_ok(p, 1000.0 + (i % 3)) for i, p in enumerate(["mem95", *others[:25]])]
    v = plan(inp, [*_base(), *no_nccl, _ok("lhs", 1000.0, 5, queue_s=H8)], EV)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.TIMEBOX, v
    reasons["NCCL never run"] = v.reason
    _reasons("no_bounded_with_a_contender", reasons)


def test_the_timebox_says_when_the_job_length_put_the_bounded_rule_out_of_reach() -> None:
    slow = [*_base(queue_s=1800.0)] + [_ok(n, 1000.0, 2, queue_s=1800.0)
                                       for n in ("ag1G", "rs1G", "dbuf")]
    v = _timeboxed(slow)
    _reasons("bounded_out_of_reach", {"30-minute queue per job": v.reason})


def test_a_flat_numeric_family_the_evidence_points_at_gets_its_ends() -> None:
    land = pp8()
    inp = _inputs(land, stop="thorough")
    ev = Evidence(((Cost.COLLECTIVE_PERMUTE, 0.4), (Cost.COMPUTE, 0.5)), "HLO")
    results = [*_base(), _ok("restore_default", 1000.0, 1), _ok("restore_default", 1000.0, 1,
                                                                "dense"),
               _ok("ovl4", 1001.0)]
    step = plan(inp, results, ev)
    assert isinstance(step, tuple)
    ends = {p.profile.name for p in step if p.rule == "wave.numeric_ends"}
    assert ends == {"ovl2", "ovl8"}


def _names(step: object) -> set[str]:
    assert isinstance(step, tuple)
    return {p.profile.name for p in step if isinstance(p, Planned)}


def test_the_timebox_names_a_deployable_recipe_before_an_incomplete_one() -> None:
    # Both significantly above +2 %: nch8 has Wave 6 done, ag768M (better first run) not.
    # (nch8 reads +3 % on dense: one run at 0 % against a one-run baseline no longer rules
    # out a -1 % regression, so it would be re-run.)
    v = _timeboxed([*_base(), _ok("ag768M", 1045.0), _ok("ag768M", 1040.0, 3),
                    _ok("ag768M", 1040.0, 4), _ok("nch8", 1043.0, 2),
                    _ok("nch8", 1039.0, 3), _ok("nch8", 1040.0, 4),
                    _ok("nch8", 1030.0, 4, "dense")])
    assert v.recipe == "nch8" and not v.conditional


def _near(fresh: list[float], base: list[float]) -> list[Result]:
    # ag768M selected on its first run; every later run is a fresh one.
    return ([_ok("baseline", b, 1) for b in base]
            + [_ok("baseline", 1000.0, 1, "dense"), _ok("evidence", 990.0, 1),
               _ok("ag768M", 1070.0)] + [_ok("ag768M", f, 3) for f in fresh])


def test_a_claim_near_the_line_waits_for_more_fresh_runs_and_baseline() -> None:
    # Fresh +5.8 % on two runs against a baseline of three: its one-sided 95 % bound
    # clears +4.5 % (before: confirmed, and a recipe truly at +4.4 % passes ~5 % of such
    # looks, the false winners traced) but its 99.5 % bound does not: not yet confirmed;
    # the baseline goes to 5 runs and the recipe to 4 fresh ones.
    inp = _inputs(fsdp8(), drift=DriftRead.MEAN)  # the arithmetic on the baseline's mean
    results = _near([1058.0, 1058.0], [1000.0, 992.0, 1008.0])
    board = build(results, inp.noise, inp.max_flakes, inp.drift)
    assert board.claim.delta("ag768M", "sparse") == pytest.approx(0.058)
    assert not confirmed_win(inp, board, "ag768M")
    step = plan(inp, results, EV)
    assert isinstance(step, tuple)
    rules = {(p.profile.name, p.rule) for p in step}
    assert ("baseline", "noise.near_line_baseline") in rules
    assert ("ag768M", "noise.near_line") in rules
    # With them, the same +5.8 % is confirmed (its 99 % bound clears +4.5 %).
    more = _near([1058.0] * 4, [1000.0, 992.0, 1008.0, 1000.0, 1000.0])
    assert confirmed_win(inp, build(more, inp.noise, inp.max_flakes, inp.drift), "ag768M")
    # A recipe that is only near the line on the wrong side stays unconfirmed with them.
    short = _near([1052.0] * 4, [1000.0, 992.0, 1008.0, 1000.0, 1000.0])
    assert not confirmed_win(inp, build(short, inp.noise, inp.max_flakes, inp.drift), "ag768M")


def test_a_claim_clear_of_the_line_is_confirmed_on_two_fresh_runs() -> None:
    inp = _inputs(fsdp8())
    results = _near([1090.0, 1090.0], [1000.0, 992.0, 1008.0])
    board = build(results, inp.noise, inp.max_flakes)
    assert confirmed_win(inp, board, "ag768M")
    step = plan(inp, results, EV)
    assert isinstance(step, tuple)
    assert not any(p.rule.startswith("noise.near_line") for p in step)


def test_a_part_half_a_standard_error_above_the_stack_without_it_is_kept() -> None:
    # ag768M+lhs measured 0.3 points above ag768M, between 0.5 and 1 se: lhs is kept
    # (before: dropped below 1 se, which on PP=8 dropped restore_default, +1.05 % on top
    # of hpas+ovl2, in ~17 % of sweeps).
    inp = _inputs(fsdp8())
    results = [*_base(), *(_ok("ag768M", 1100.0, 3) for _ in range(3)),
               *(_ok("ag768M+lhs", 1103.0, 3) for _ in range(3))]
    board = build(results, inp.noise, inp.max_flakes)
    se = board.noise * (1 / 3 + 1 / 3) ** 0.5
    gap = (board.delta("ag768M+lhs", "sparse") or 0) - (board.delta("ag768M", "sparse") or 0)
    assert 0.5 * se < gap < se
    cands = Candidates(inp, board, EV, profiles(inp))
    p = pruned(inp, board, cands, "ag768M+lhs")
    assert p.name == "ag768M+lhs" and not p.left_out


def test_the_win_bounds_widen_to_students_t_at_the_noise_estimates_df() -> None:
    board = build(_base(), 0.008, 3)
    assert board.noise_df == 4 + 2  # the prior's 4, the baseline's 3 runs
    # Cornish-Fisher against the t table: t(0.95, 5) = 2.015, t(0.99, 30) = 2.457.
    assert replace(board, noise_df=5).t(1.645) == pytest.approx(2.015, abs=0.02)
    assert replace(board, noise_df=30).t(2.326) == pytest.approx(2.457, abs=0.01)
    assert replace(board, noise_df=10_000).t(1.645) == pytest.approx(1.645, abs=0.001)


def _ambiguous() -> list[Result]:
    # ag768M+lhs +10.2 % on its two fresh runs, ag768M alone +10.0 % over 3: lhs's gap is
    # ~0.4 se, inside the ambiguous zone (0, 1] se.
    return [*_base(), _ok("lhs", 1010.0), _ok("ag768M", 1100.0), _ok("ag768M", 1098.0, 3),
            _ok("ag768M", 1102.0, 3), _ok("ag768M", 1100.0, 4, "dense"),
            _ok("ag768M+lhs", 1106.0, 3), _ok("ag768M+lhs", 1102.0, 4),
            _ok("ag768M+lhs", 1102.0, 4), _ok("ag768M+lhs", 1102.0, 4, "dense")]


def _part_checks(inp: Inputs, results: list[Result]) -> set[str]:
    step = plan(inp, results, EV)
    assert isinstance(step, tuple), step  # before: the winner stop, lhs kept on 0.4 se
    return {p.profile.name for p in step if p.rule == "verdict.part_check"}


def test_an_ambiguous_neutral_part_is_tested_and_then_left_out() -> None:
    inp = _inputs(fsdp8())
    results = _ambiguous()
    assert _part_checks(inp, results) == {"ag768M+lhs", "ag768M"}
    # The re-runs say lhs adds nothing: the stack measures below the stack without it.
    results += [_ok("ag768M+lhs", 1095.0, 5), _ok("ag768M", 1102.0, 5)]
    v = plan(replace(inp, report_runs=0), results, EV)  # the parts, not the report block
    assert isinstance(v, Verdict) and v.rule == "stop.winner" and v.recipe == "ag768M", v
    assert len(v.left_out) == 1 and v.left_out[0].startswith("lhs (")
    _reasons("ambiguous_part_left_out", {"left_out": v.left_out[0]})


def test_an_ambiguous_real_part_is_tested_and_kept() -> None:
    inp = _inputs(fsdp8())
    results = _ambiguous()
    assert _part_checks(inp, results) == {"ag768M+lhs", "ag768M"}
    # The re-runs say lhs helps: the gap leaves the zone above 1 se.
    results += [_ok("ag768M+lhs", 1110.0, 5), _ok("ag768M", 1096.0, 5)]
    v = plan(replace(inp, report_runs=0), results, EV)  # the parts, not the report block
    assert isinstance(v, Verdict) and v.rule == "stop.winner" and v.recipe == "ag768M+lhs", v
    assert not v.left_out
    assert len(v.tested) == 1 and v.tested[0].startswith("lhs kept (")
    _reasons("ambiguous_part_kept", {"tested": v.tested[0], "reason": v.reason})


def test_a_restore_default_that_ran_out_of_memory_is_said_in_the_verdict() -> None:
    # The env file's memory fraction is what lets the job fit: restore_default (its image
    # default) OOMs. The verdict rests on the env file as deployed, and says so.
    oom = Result("restore_default", "sparse", Outcome.OOM, detail="allocation of 3.1 GiB",
                 wave=1)
    inp = _inputs(pp8())
    v = _timeboxed([*_base(), oom, _ok("ag768M", 1004.0), _ok("ag768M", 1003.0, 3)], inp)
    _reasons("restore_default_oom", {"restore_default dropped": v.reason})
    measured = _timeboxed([*_base(), _ok("restore_default", 1001.0, 1),
                           _ok("ag768M", 1004.0), _ok("ag768M", 1003.0, 3)], inp)
    assert "restore_default" not in measured.reason


def test_a_win_that_wave6_shows_regressing_another_tag_does_not_end_the_sweep() -> None:
    """The SKILL.md's winner rule stops on a confirmed >= +5 % recipe "that doesn't
    regress other tags" (> 1 %). Red team: a +7.5 % NCCL flag that costs dense 3 % ended
    the sweep as a conditional proposal beside a +6 % all-gather threshold that passed
    Wave 6 (86 of 150 seeds). Now that win is no stop: no verdict of the winner rule names
    a recipe Wave 6 read as regressing."""
    nch8, ag512 = "NCCL_NCHANNELS_PER_NET_PEER=8", f"{AG}={512 * 2**20}"
    tags = ("sparse", "dense")
    land = Landscape(parallelism="FSDP=8", tags=tags,
                     base_tgs={"sparse": 1000.0, "dense": 1100.0},
                     effects={nch8: Effect(tgs=1.075), ag512: Effect(tgs=1.06)},
                     tag_effects={"dense": {nch8: Effect(tgs=0.97), ag512: Effect(tgs=1.05)}},
                     noise=0.008, flake_rate=0.0, evidence=fsdp8().evidence)
    inp = _inputs(land)
    winners = []
    for seed in range(8):
        v = replay(inp, land, random.Random(seed)).verdict
        if v.rule == "stop.winner":
            winners.append(v)
            assert not v.regressed, (seed, v.recipe, v.reason)
    assert winners  # the rule still fires (on a recipe that passed Wave 6)
