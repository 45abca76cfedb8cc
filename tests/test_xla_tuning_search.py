"""The xla-tuning wave planner: waves, noise, the three stop rules, the failure playbook."""

from __future__ import annotations

import random
import re

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import AG, default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Landscape
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.rules import FILL_ENDS, PAIR_FILL
from sweepd.kinds.xla_tuning.search import Planned, Verdict, VerdictKind, plan
from tests.golden_files import GOLDEN, check_golden_cases

# The planner's reasons and verdicts a person reads, one golden file a test.
GOLDEN_DIR = GOLDEN / "xla_search"

FSDP_EVIDENCE = Evidence(((Cost.ALL_GATHER, 0.4), (Cost.COMPUTE, 0.5)), "job 1002 HLO")


def _inputs(land: Landscape, **kw: object) -> Inputs:
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                  **kw)  # type: ignore[arg-type]


def _wave(step: object) -> tuple[Planned, ...]:
    assert isinstance(step, tuple), step
    return step


def _ok(profile: str, tgs: float, wave: int = 1, tag: str = "sparse") -> Result:
    return Result(profile, tag, Outcome.OK, tgs, 28.0, queue_s=600, wave=wave)


def _wave1_done(inp: Inputs) -> list[Result]:
    return [_ok("baseline", 1000.0), _ok("baseline", 1000.0, tag="dense"),
            _ok("evidence", 990.0)] + ([_ok("restore_default", 1000.0)] if inp.deployed else [])


def test_wave1_is_the_baseline_pair_per_tag_and_the_evidence_run() -> None:
    inp = _inputs(pp8())
    first = _wave(plan(inp, [], None))
    assert {(p.profile.name, p.tag, p.rule) for p in first} == {
        ("baseline", "sparse", "wave1.baseline"), ("baseline", "dense", "wave1.baseline"),
        ("restore_default", "sparse", "wave1.restore_default"),
        ("restore_default", "dense", "wave1.restore_default"),
        ("evidence", "sparse", "wave1_5.evidence")}
    evidence = next(p for p in first if p.profile.name == "evidence")
    assert {s.label for s in evidence.profile.settings} >= {"profiler=xplane", "ENABLE_XLA_DUMP=1"}
    pending = [Result(p.profile.name, p.tag, Outcome.PENDING, wave=1) for p in first]
    assert plan(inp, pending, None) == ()  # a wave is reviewed once it has finished


def test_the_evidence_orders_wave2() -> None:
    inp = _inputs(fsdp8())
    wave2 = _wave(plan(inp, _wave1_done(inp), FSDP_EVIDENCE))
    assert wave2[0].profile.family in ("ag", "rs", "agrs")
    assert all(p.wave == 2 for p in wave2) and 1 <= len(wave2) <= inp.wave_size
    ev = Evidence(((Cost.ALL_TO_ALL, 0.5),))
    assert _wave(plan(inp, _wave1_done(inp), ev))[0].profile.mechanisms == {
        next(iter(_wave(plan(inp, _wave1_done(inp), ev))[0].profile.mechanisms))}
    check_golden_cases(GOLDEN_DIR / "evidence_orders_wave2.txt", {
        "all-gather evidence: first of wave 2": wave2[0].reason,
        "all-to-all evidence: first of wave 2": _wave(plan(inp, _wave1_done(inp), ev))[0].reason})


def test_nothing_wins_on_one_run() -> None:
    inp = _inputs(fsdp8(), stop="thorough")
    results = [*_wave1_done(inp), _ok("ag1G", 1120.0, wave=2)]
    nxt = _wave(plan(inp, results, FSDP_EVIDENCE))
    rules = {p.profile.name: p.rule for p in nxt}
    assert rules["ag1G"] == "noise.rerun" and rules["baseline"] == "noise.rerun_baseline"
    assert "would change the verdict" in next(p.reason for p in nxt if p.profile.name == "ag1G")
    # The seed's stop rules: a +12 % single run sends what the winner rule needs first.
    seed = _wave(plan(_inputs(fsdp8()), results, FSDP_EVIDENCE))
    assert {(p.profile.name, p.tag, p.rule) for p in seed} == {
        ("ag1G", "sparse", "noise.confirm"), ("baseline", "sparse", "noise.rerun_baseline")}


def test_stop_rule_winner_on_the_facts_fsdp_landscape() -> None:
    land = fsdp8()
    inp = _inputs(land)
    r = replay(inp, land, random.Random(0))
    v = r.verdict
    assert v.kind is VerdictKind.PROPOSAL and v.rule == "stop.winner"
    assert v.recipe is not None and v.gain is not None and v.gain >= 0.05
    assert (land.gain(r.settings(inp), "sparse") or 0) >= 1.105  # within 1 % of the truth
    assert any(p.rule == "wave6.cross_tag" and p.tag == "dense" for p in r.planned)
    rerun = [x for x in r.results if x.profile == v.recipe and x.tag == "sparse"]
    assert len(rerun) >= 2  # the winner was measured more than once


def test_wave5_predicts_the_bubble_on_pp() -> None:
    land = pp8()
    r = replay(_inputs(land, max_queue_hours=16.0, stop="thorough"), land, random.Random(2))
    shapes = [p for p in r.planned if p.rule == "wave5.pipeline_shape"]
    assert shapes
    check_golden_cases(GOLDEN_DIR / "wave5_bubble.txt", {"first shape": shapes[0].reason})


def _flat(n_families: int = 30) -> Landscape:
    """Nothing helps: every flag within +-0.3 %."""
    land = fsdp8()
    rng = random.Random(0)
    par = Parallelism.parse("FSDP=8")
    effects = {s.label: Effect(tgs=1 + rng.uniform(-0.003, 0.003))
               for p in default_catalog(par) for s in p.settings}
    return land.model_copy(update={"effects": effects, "tag_effects": {}, "interactions": (),
                                   "flake_rate": 0.0})


def test_stop_rule_bounded() -> None:
    land = _flat()
    r = replay(_inputs(land, bounded_count=12), land, random.Random(1))
    assert r.verdict.kind is VerdictKind.BOUNDED and r.verdict.rule == "stop.bounded"
    check_golden_cases(GOLDEN_DIR / "stop_bounded.txt", {"verdict": r.verdict.reason})


def test_stop_rule_timebox() -> None:
    inp = _inputs(fsdp8())
    results = [*_wave1_done(inp)] + [_ok(f"ag{v}", 1001.0, wave=2) for v in ("1G", "2G")]
    results.append(Result("nch8", "sparse", Outcome.OK, 1000.0, queue_s=8 * 3600, wave=2))
    # A run still in flight finishes first: nothing new, no verdict yet (a verdict now
    # would end the sweep with its job left on the cluster).
    in_flight = [*results, Result("nch4", "sparse", Outcome.PENDING, wave=2)]
    assert plan(inp, in_flight, FSDP_EVIDENCE) == ()
    v = plan(inp, results, FSDP_EVIDENCE)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.TIMEBOX
    assert v.rule == "stop.timebox" and "8 h" in v.reason


def test_unknown_flag_is_dropped_never_retried_and_its_flag_skipped() -> None:
    inp = _inputs(fsdp8())
    results = [*_wave1_done(inp), Result("ag768M", "sparse", Outcome.UNKNOWN_FLAG,
                                         detail=AG,
                                         wave=2)]
    nxt = _wave(plan(inp, results, FSDP_EVIDENCE))
    names = {p.profile.name for p in nxt}
    assert "ag768M" not in names
    assert not any(AG in p.profile.keys for p in nxt)


def test_oom_is_dropped_with_its_allocation() -> None:
    land = fsdp8()
    r = replay(_inputs(land), land, random.Random(5))
    ooms = [x for x in r.results if x.outcome is Outcome.OOM]
    assert ooms and all(x.detail.endswith("GiB") for x in ooms)
    for x in ooms:  # same flags, same OOM: never run again
        assert sum(1 for y in r.results if (y.profile, y.tag) == (x.profile, x.tag)) == 1


def test_flake_is_retried_three_times_then_unmeasurable() -> None:
    inp = _inputs(fsdp8())
    base = [*_wave1_done(inp), _ok("ag768M", 1001.0, wave=2)]
    flake = Result("rs768M", "sparse", Outcome.FLAKE, detail="RCCL flake", wave=2)
    once = _wave(plan(inp, [*base, flake], FSDP_EVIDENCE))
    retry = [p for p in once if p.profile.name == "rs768M"]
    assert retry and retry[0].rule == "failure.flake_retry" and "1/3" in retry[0].reason
    thrice = _wave(plan(inp, [*base, flake, flake, flake], FSDP_EVIDENCE))
    assert "rs768M" not in {p.profile.name for p in thrice}


def test_not_applied_is_replaced_once_then_dropped_naming_the_culprit() -> None:
    inp = _inputs(fsdp8())
    base = [*_wave1_done(inp), _ok("ag768M", 1001.0, wave=2)]
    lost = Result("nch8", "sparse", Outcome.NOT_APPLIED, detail="configs/m.env.sh", wave=2)
    once = _wave(plan(inp, [*base, lost], FSDP_EVIDENCE))
    retry = next(p for p in once if p.profile.name == "nch8")
    assert retry.rule == "failure.not_applied_retry" and "configs/m.env.sh" in retry.reason
    twice = _wave(plan(inp, [*base, lost, lost], FSDP_EVIDENCE))
    assert "nch8" not in {p.profile.name for p in twice}


def test_a_recipe_that_regresses_another_tag_is_config_conditional() -> None:
    land = fsdp8()
    hurt = {**land.tag_effects["dense"], "NCCL_NCHANNELS_PER_NET_PEER=8": Effect(tgs=0.9)}
    effects = {k: v for k, v in land.effects.items() if "combine_threshold" not in k}
    effects["NCCL_NCHANNELS_PER_NET_PEER=8"] = Effect(tgs=1.08)
    land = land.model_copy(update={"tag_effects": {"dense": hurt}, "effects": effects,
                                   "interactions": ()})
    # nch8 (-10 % on dense) is no winner-rule stop: the search went on to a stack that
    # Wave 6 shows does not regress dense (nch8 alone read as regressing it). Such a stack
    # is found in about 6 of 100 seeds (the rest end on the 8 h stop naming nch8, regressed
    # and conditional): seed 4 is one.
    r = replay(_inputs(land), land, random.Random(4))
    assert r.verdict.kind is VerdictKind.PROPOSAL and r.verdict.rule == "stop.winner"
    assert not r.verdict.regressed and not r.verdict.conditional
    assert ("nch8", "dense") in {(p.profile.name, p.tag) for p in r.planned}
    # Every flag costs dense 10 %: what the sweep names is config-conditional.
    worse = {k: Effect(tgs=0.9) for k in [*effects, *hurt]}
    land = land.model_copy(update={"tag_effects": {"dense": {**hurt, **worse}}})
    v = replay(_inputs(land), land, random.Random(4)).verdict
    assert v.recipe is not None and v.rule != "stop.winner"
    assert v.regressed == ("dense",) and "config-conditional" in v.reason
    assert v.conditional and "dense" in v.conditional_reason


def test_a_result_for_a_profile_outside_the_catalog_is_refused_by_name() -> None:
    inp = _inputs(fsdp8())
    results = [*_wave1_done(inp), _ok("ag1G+nosuch", 1100.0, wave=2)]
    with pytest.raises(ValueError, match=r"'ag1G\+nosuch': not in this sweep's catalog"):
        plan(inp, results, FSDP_EVIDENCE)


def test_near_the_8h_stop_the_leaders_are_confirmed_before_anything_new() -> None:
    inp = _inputs(fsdp8(), stop="thorough")
    # 4.8 h spent at ~1 h per run: a full wave of 8 would pass 8 h, the confirmations fit.
    results = [Result(r.profile, r.tag, r.outcome, r.tgs, queue_s=1.5 * 3600, wave=1)
               for r in _wave1_done(inp)]
    results += [_ok("ag768M", 1100.0, wave=2), _ok("nch8", 1040.0, wave=2)]
    nxt = _wave(plan(inp, results, FSDP_EVIDENCE))
    assert {p.rule for p in nxt} <= {"noise.confirm", "noise.rerun_baseline", "wave6.cross_tag",
                                     "wave6.beside_baseline"}
    assert {("ag768M", "sparse"), ("ag768M", "dense")} <= {(p.profile.name, p.tag) for p in nxt}
    results += [_ok("ag768M", 1110.0, wave=3), _ok("ag768M", 1100.0, wave=3),
                _ok("baseline", 1000.0, wave=3), _ok("baseline", 1000.0, wave=3),
                _ok("ag768M", 1100.0, wave=3, tag="dense")]
    results[0] = Result("baseline", "sparse", Outcome.OK, 1000.0, queue_s=8 * 3600, wave=1)
    v = plan(inp, results, FSDP_EVIDENCE)
    # Everything the winner rule needs came in with the last wave: that stop, not 8 h's.
    assert isinstance(v, Verdict) and v.kind is VerdictKind.PROPOSAL and v.recipe == "ag768M"
    assert not v.conditional and v.n == 2 and v.gain == pytest.approx(0.105)
    assert "unconfirmed" not in v.reason and "confirmed >= +5%" in v.reason


# One FSDP=8 cell, one tag, at the facts file's noise: what each landscape below shares.
CELL = """
parallelism: FSDP=8
tags: [default]
base_tgs: {default: 1000.0}
noise: 0.008
flake_rate: 0.02
"""
EVIDENCE = """
evidence: {"all-gather (DCN)": 0.42, "reduce-scatter (DCN)": 0.18, compute: 0.35,
           "all-to-all": 0.05}
"""

LEADER_HIDES_NCCL = CELL + """
effects:
  xla_gpu_all_gather_combine_threshold_bytes=805306368: {tgs: 1.05}
  xla_gpu_all_gather_combine_threshold_bytes=1073741824: {tgs: 1.048}
  xla_gpu_all_gather_combine_threshold_bytes=536870912: {tgs: 1.045}
  xla_gpu_all_gather_combine_threshold_bytes=2147483648: {tgs: 1.035}
  NCCL_NCHANNELS_PER_NET_PEER=8: {tgs: 1.08}
  xla_gpu_enable_while_loop_double_buffering=true: {tgs: 0.97}
interactions:
  - members: [NCCL_NCHANNELS_PER_NET_PEER=8, xla_gpu_all_gather_combine_threshold_bytes]
    tgs: 0.96
""" + EVIDENCE


def test_a_leader_its_fresh_runs_do_not_confirm_leaves_the_other_mechanisms_to_try() -> None:
    """The all-gather family's search delta passes +5 % on its selecting runs, its fresh
    runs do not; Waves 5 and 6 are empty on this cell. The NCCL channel count (+8 % alone)
    must still be tried, not a "catalog exhausted" with the transport mechanism untried
    (it was, in 6 of these 12 seeds)."""
    land = Landscape.from_yaml(LEADER_HIDES_NCCL)
    verdicts = [replay(_inputs(land, max_queue_hours=48.0), land, random.Random(s)).verdict
                for s in range(12)]
    assert all(v.kind is not VerdictKind.EXHAUSTED for v in verdicts), verdicts
    assert sum(v.recipe == "nch8" for v in verdicts) >= 8, [v.recipe for v in verdicts]


def test_a_deployed_setting_restore_default_cannot_reset_is_named_in_the_verdict() -> None:
    """The env file sets a flag whose default depends on the XLA release and an NCCL
    variable with no default to set: a setting cannot be taken out by appending, so
    restore_default leaves them and their removal is never measured; the verdict says so
    rather than "bounded". Double buffering (XLA's own default: off) is put back."""
    land = Landscape.from_yaml(LEADER_HIDES_NCCL.replace(
        "effects:", "deployed: [xla_gpu_enable_while_loop_double_buffering=true, "
                    "xla_gpu_enable_highest_priority_async_stream=false, "
                    "NCCL_PROTO=Simple]\neffects:"))
    v = replay(_inputs(land, max_queue_hours=48.0), land, random.Random(1)).verdict
    check_golden_cases(GOLDEN_DIR / "unrestorable_named.txt", {"verdict": v.reason})
    assert "double_buffering" not in v.reason.split("not measured")[1]


PAIR_ONLY = CELL + """
effects:
  xla_gpu_enable_highest_priority_async_stream=true: {tgs: 1.012}
  NCCL_NCHANNELS_PER_NET_PEER=8: {tgs: 1.012}
  xla_gpu_enable_while_loop_double_buffering=true: {tgs: 0.97}
interactions:
  - members: [xla_gpu_enable_highest_priority_async_stream=true, NCCL_NCHANNELS_PER_NET_PEER=8]
    tgs: 1.04
""" + EVIDENCE


def test_seed_mode_runs_the_pending_stacks_before_calling_a_cell_bounded() -> None:
    """Two singles of +1.2 % whose pair is +6.5 %: the seed's "25 profiles, none above
    +2 %" fired with their stack still to run (the pair found in 1 of 12 seeds). A
    bounded verdict now waits for the pending stacks, in seed mode too (3 of 12). With
    the catalog spent at 21 profiles, 4 seeds ended "catalog exhausted" as bounded, short
    of the seed's 25: pairs of the fastest singles now fill the count (4 of 12)."""
    land = Landscape.from_yaml(PAIR_ONLY)
    inp = _inputs(land, max_queue_hours=48.0, drift=DriftRead.MEAN)  # seeds built on it
    played = [replay(inp, land, random.Random(s)) for s in range(12)]
    verdicts = [p.verdict for p in played]
    # The fill is planned under its rule: each a pair of two measured singles, its reason
    # their readings, the pair's prediction and how far short of the count the catalog is.
    fills = [p for r in played for p in r.planned if p.rule == PAIR_FILL.id]
    assert fills
    for p in fills:
        a, b = p.profile.name.split("+")
        assert re.fullmatch(rf"({a}|{b}) [+-]\d+\.\d+% \+ ({a}|{b}) [+-]\d+\.\d+%: [+-]\d+\.\d+% "
                            r"if they add up; \d+ profiles short of the bounded rule's 25",
                            p.reason), p.reason
    recipes = [v.recipe for v in verdicts]
    assert recipes.count("hpas+nch8") >= 4, recipes
    short = [v.reason for v in verdicts if v.rule == "stop.bounded"
             and int(v.reason.split()[0]) < 25]
    assert not short, short


OVL = "xla_gpu_experimental_parallel_collective_overlap_limit"
OVERLAP_AT_ITS_END = CELL.replace("flake_rate: 0.02", "flake_rate: 0.0") + f"""
effects:
  {OVL}=2: {{tgs: 1.065}}
  {OVL}=4: {{tgs: 1.0}}
  {OVL}=8: {{tgs: 0.995}}
  xla_gpu_enable_while_loop_double_buffering=true: {{tgs: 0.996}}
  xla_gpu_enable_highest_priority_async_stream=true: {{tgs: 1.002}}
  NCCL_NCHANNELS_PER_NET_PEER=8: {{tgs: 1.004}}
  NCCL_PROTO=Simple: {{tgs: 0.988}}
""" + EVIDENCE


def test_a_flat_family_run_at_one_value_has_its_ends_tried_before_bounded() -> None:
    """Red-team cell: the overlap limit (the fourth mechanism here) run at 4 only read
    flat; its end 2 (+6.5 %) was never run and the sweep ended "structurally bounded"
    (11 of 12 seeds), filling the count with pairs of noise-level singles. The ends of a
    family run at one value now come first in the fill."""
    land = Landscape.from_yaml(OVERLAP_AT_ITS_END)
    played = [replay(_inputs(land, max_queue_hours=48.0), land, random.Random(1000 + s))
              for s in range(12)]
    recipes = [r.verdict.recipe for r in played]
    # The ends are planned under their rule, saying the family read flat at its one value.
    ends = [p for r in played for p in r.planned if p.rule == FILL_ENDS.id]
    assert {p.profile.name for p in ends if p.profile.family == "ovl"} == {"ovl2", "ovl8"}
    assert all(re.match(rf"{p.profile.family}: flat at \S+ \([+-]\d+\.\d+%\), its only "
                        rf"value run; trying its end {p.profile.name} ", p.reason)
               for p in ends), [p.reason for p in ends]
    assert sum("ovl2" in (r or "").split("+") for r in recipes) >= 6, recipes
