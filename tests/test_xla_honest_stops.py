"""Honest xla-tuning stops: Wave 5 before a PP cell is bounded, the untried catalog named in
a verdict without a recipe, the claim's interval at Student's t, Wave 6 read until it is
clear of the -1 % line or said to be unresolved."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Landscape
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import REPORT, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.rules import NUMERIC_NEIGHBOUR
from sweepd.kinds.xla_tuning.search import Planned, VerdictKind, plan
from sweepd.kinds.xla_tuning.verdict.structure import CaveatKind, Decided, GainSource
from tests.golden_files import GOLDEN, check_golden_cases
from tests.xla_cells import nccl_win_on_sparse


def _reasons(name: str, cases: dict[str, str]) -> None:
    """The reasons a person reads, each whole, in one golden per test."""
    check_golden_cases(GOLDEN / "xla_tuning" / "honest_stops" / f"{name}.txt", cases)

AG = "xla_gpu_all_gather_combine_threshold_bytes"
SIZES = (256, 384, 512, 768, 1024, 2048, 4096)
# The caveats that name what a "no change" verdict leaves open ("not shown either way").
OPEN_KINDS = (CaveatKind.OPEN_QUESTION, CaveatKind.UNRUN_STACK, CaveatKind.STACK_ABOVE)
SMALL = {  # every other knob a small realistic effect (the red team's cells)
    "xla_gpu_enable_while_loop_double_buffering=true": 0.996,
    "xla_gpu_enable_pipelined_reduce_scatter=true": 0.997,
    "xla_gpu_enable_highest_priority_async_stream=true": 1.002,
    "xla_gpu_enable_latency_hiding_scheduler=true": 1.001, "NCCL_BUFFSIZE=16777216": 0.985,
    "NCCL_PROTO=Simple": 0.988, "NCCL_IB_QPS_PER_CONNECTION=8": 1.002,
    "XLA_PYTHON_CLIENT_MEM_FRACTION=.95": 1.003, "NCCL_NCHANNELS_PER_NET_PEER=8": 1.004,
    "xla_gpu_experimental_parallel_collective_overlap_limit=2": 0.96,
    "xla_gpu_experimental_parallel_collective_overlap_limit=4": 0.955,
    "xla_gpu_experimental_parallel_collective_overlap_limit=8": 0.948,
}


def _land(par: str, tags: tuple[str, ...], effects: dict[str, float], **kw: object) -> Landscape:
    return Landscape.model_validate({
        "parallelism": par, "tags": list(tags),
        "base_tgs": {t: 1000.0 + 60 * i for i, t in enumerate(tags)}, "noise": 0.008,
        "effects": {k: {"tgs": v} for k, v in {**SMALL, **effects}.items()}, **kw})


def _inputs(land: Landscape, **kw: object) -> Inputs:
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                  **kw)  # type: ignore[arg-type]


def _ag(by_mib: dict[int, float]) -> dict[str, float]:
    return {f"{AG}={m << 20}": g for m, g in by_mib.items()}


HYBRID = _land("PP=2,FSDP=4", ("default",), {
    "num_pipeline_microbatches=4": 1.035, "num_pipeline_microbatches=8": 1.07,
    **_ag({256: 1.0, 384: 1.005, 512: 1.01, 768: 1.015, 1024: 1.02, 2048: 1.015, 4096: 1.005})},
    evidence={"collective-permute / send-recv": 0.15, "pipeline bubble": 0.25,
              "all-gather (DCN)": 0.2, "compute": 0.4})


def test_a_pp_cell_is_not_bounded_before_its_pipeline_shapes_run() -> None:
    """PP=2,FSDP=4 where only mb8 (+7 %) helps: the bounded count leaves shapes out, and
    "structurally bounded" fired before Wave 5 ran (19 of 30 seeds; the shape found in 9).
    Now Wave 5 runs before a bounded verdict: the shape found in 25 of 30."""
    land = HYBRID
    runs = [replay(_inputs(land), land, random.Random(s)) for s in range(10)]
    verdicts = [r.verdict for r in runs]
    assert not [v for v in verdicts if v.kind is VerdictKind.BOUNDED], verdicts
    found = [v.recipe for v in verdicts if v.recipe and "mb8" in v.recipe.split("+")]
    assert len(found) >= 6, [v.recipe for v in verdicts]


def test_a_verdict_without_a_recipe_names_the_catalog_it_never_ran() -> None:
    land = fsdp8()
    rng = random.Random(0)
    flat = {s.label: Effect(tgs=1 + rng.uniform(-0.003, 0.003))
            for p in default_catalog(Parallelism.parse("FSDP=8")) for s in p.settings}
    land = land.model_copy(update={"effects": flat, "tag_effects": {}, "interactions": (),
                                   "flake_rate": 0.0})
    # The SKILL.md's rule as it comes (family_gaps off): it fires with the catalog unrun.
    inp = _inputs(land, bounded_count=12, family_gaps=False)
    r = replay(inp, land, random.Random(1))
    v = r.verdict
    assert v.kind is VerdictKind.BOUNDED and v.recipe is None
    assert "family_gaps off" in v.reason, v.reason
    ran = {part for x in r.results if x.tag == inp.tags[0] for part in x.profile.split("+")}
    # lhs (=true on the image's True) changes nothing: it is said apart, not counted unrun.
    never = [p for p in inp.catalog if p.name not in ran and p.name != "lhs"]
    assert never and f"not run: {len(never)} profiles" in v.reason, v.reason
    # lhs is said apart, at the end, as already in effect.
    assert v.reason.endswith(": lhs"), v.reason
    _reasons("bounded_with_family_gaps_off", {"the verdict": v.reason})
    once = [p for p in inp.catalog if p.family == "ovl" and p.name in ran]
    if len(once) == 1:
        assert f"({once[0].name} only)" in v.reason, v.reason


def test_a_verdict_with_no_catalog_profile_tried_says_so() -> None:
    """restore_default alone wins in Wave 1 (the env file carries another cell's flags)."""
    land = _land("FSDP=8", ("default",), {f"{AG}=1073741824": 0.92},
                 deployed=[f"{AG}=1073741824"])
    inp = _inputs(land)
    base = [Result("baseline", "default", Outcome.OK, 1000.0, queue_s=600, wave=w)
            for w in (1, 2, 2)]
    rd = [Result("restore_default", "default", Outcome.OK, 1090.0, queue_s=600, wave=w,
                 rule=rule) for w, rule in ((1, "wave1.restore_default"),
                                            (2, "noise.confirm"), (2, "noise.confirm"),
                                            (3, "noise.confirm"), (3, "noise.confirm"))]
    ev = Result("evidence", "default", Outcome.OK, 990.0, queue_s=600, wave=1)
    # The verdict's text, not the report block (report_runs=0: tests/test_xla_claims.py).
    step = plan(replace(inp, report_runs=0), [*base, *base[1:], *rd, ev], None)
    assert not isinstance(step, tuple), step
    assert step.recipe == "restore_default", step
    # ag1G (the env file's value) and lhs (the image's) change nothing: never counted.
    left = len(inp.catalog) - 2
    assert f"all {left} never run" in step.reason, step.reason
    _reasons("no_catalog_profile_tried", {"the verdict": step.reason})


def test_the_claims_interval_uses_student_t_at_the_pooled_noises_df() -> None:
    results = [Result("baseline", "default", Outcome.OK, x, wave=1) for x in (1000.0, 1010.0)]
    results += [Result("ag1G", "default", Outcome.OK, x, wave=2, rule=r)
                for x, r in ((1050.0, "search"), (1040.0, "noise.confirm"))]
    board = build(results, 0.008, 3)
    lo, hi = board.claim.interval("ag1G", "default")  # type: ignore[misc]
    half = (hi - lo) / 2
    assert math.isclose(half, board.t(1.96) * board.claim.se("ag1G", "default"))
    assert half > 1.96 * board.claim.se("ag1G", "default") * 1.1  # df 5: t ~2.57


REGRESS_SMALL = _land("FSDP=8", ("sparse", "dense"), _ag(
    {256: 1.05, 384: 1.06, 512: 1.07, 768: 1.07, 1024: 1.07, 2048: 1.06, 4096: 1.02}),
    tag_effects={"dense": {f"{AG}={m << 20}": {"tgs": 0.982} for m in SIZES}},
    evidence={"all-gather (DCN)": 0.40, "reduce-scatter (DCN)": 0.18, "compute": 0.37,
              "all-to-all": 0.05})


def test_wave6_reruns_an_ambiguous_read_on_the_other_tag_with_its_baseline() -> None:
    inp = _inputs(REGRESS_SMALL)
    ok = [Result("baseline", "sparse", Outcome.OK, 1000.0, wave=w) for w in (1, 3, 3)]
    ok += [Result("baseline", "dense", Outcome.OK, 1060.0, wave=1),
           Result("evidence", "sparse", Outcome.OK, 990.0, wave=1)]
    ok += [Result("ag768M", "sparse", Outcome.OK, x, wave=w, rule=r) for x, w, r in
           ((1070.0, 2, "search"), (1070.0, 3, "noise.confirm"), (1071.0, 3, "noise.confirm"),
            (1069.0, 4, "noise.confirm"), (1070.0, 4, "noise.confirm"))]
    ok.append(Result("ag768M", "dense", Outcome.OK, 1057.7, wave=4))  # -0.22 %: one run
    nxt = plan(inp, ok, None)
    assert isinstance(nxt, tuple), nxt  # not called unconditional on one run
    got = {(p.profile.name, p.tag, p.rule) for p in nxt if isinstance(p, Planned)}
    assert {("ag768M", "dense", "wave6.recheck"),
            ("baseline", "dense", "wave6.recheck_baseline")} <= got, got


def test_wave6_never_calls_a_small_regression_unconditional() -> None:
    """A true -1.8 % on the other tag read once against a one-run baseline was called
    unconditional in 30 of 100 sweeps; now 1 of 100 (each one-sided bound must clear)."""
    inp = _inputs(REGRESS_SMALL)
    verdicts = [replay(inp, REGRESS_SMALL, random.Random(s)).verdict for s in range(8)]
    props = [v for v in verdicts if v.recipe]
    assert props and all(v.conditional for v in props), [v.reason for v in props]
    assert all("dense" in v.conditional_reason for v in props)


def test_wave6_runs_up_to_five_a_side_before_leaving_a_recipe_conditional() -> None:
    """A +7 % NCCL flag at a true -0.3 % on dense (inside the -1 % line). At three runs a
    side the one-sided bound on dense's delta (~1.1 %) cannot clear -1 % for a recipe that
    close to it: read clean in 9 of 30 sweeps, the rest conditional (`--apply` asks for
    --force). Wave 6 now re-runs up to five a side while unresolved: 12 of 30 clean; none
    of those re-runs beyond five."""
    land, inp = nccl_win_on_sparse(0.997)
    clean = 0
    for seed in range(30):
        played = replay(inp, land, random.Random(seed))
        v = played.verdict
        clean += bool(v.recipe and "nch8" in v.recipe.split("+")
                      and not (v.conditional or v.regressed))
        rechecks = [p for p in played.planned if p.tag == "dense" and p.rule == "wave6.recheck"]
        assert len(rechecks) <= 4  # the first run and four re-runs
    assert clean >= 11, clean


def test_a_bounded_verdict_names_the_family_values_it_never_ran() -> None:
    """A red-team cell: the all-gather threshold helps only at its end value (256 MiB,
    +8 %), every other value -2 %. The family's slope from 768 MiB leads to its neighbours,
    never to 256 MiB, and "structurally bounded" fired (49 of 100 seeds) saying nothing of
    the values never run: a negative finding holds only for the values run."""
    land = _land("FSDP=8", ("default",), _ag(AG_AT_ITS_END))
    played = replay(_inputs(land, family_gaps=False), land, random.Random(0))
    v = played.verdict
    assert v.kind is VerdictKind.BOUNDED and v.recipe is None, v
    # The slope's steps, each planned under its rule: a value beside its family's best so
    # far, which the reason names.
    steps = [p for p in played.planned if p.rule == NUMERIC_NEIGHBOUR.id]
    assert any(p.profile.family == "ag" for p in steps)
    for p in steps:
        best = p.reason.split("best so far ")[1].split()[0]
        assert p.reason.startswith(f"{p.profile.family}: best so far {best} ")
        family = [q for q in played.planned if q.profile.family == p.profile.family]
        position = next(q.profile.position for q in family if q.profile.name == best)
        assert abs(p.profile.position - position) == 1, (p.profile.name, best)
    _reasons("family_values_not_run", {"the verdict": v.reason})


AG_AT_ITS_END = {256: 1.08, 384: 0.98, 512: 0.98, 768: 0.98, 1024: 0.98, 2048: 0.98, 4096: 0.98}


def test_a_family_value_that_helps_alone_is_run_before_a_bounded_verdict() -> None:
    """The same cell with the default `family_gaps`: the SKILL.md's 25 profiles leave most
    of the 8 h unused, and the family values never run go first in that time. Over 100
    seeds: bounded 49 -> 0, the +8 % threshold (ag256M, or agrs256M which sets it too)
    named in 51 -> 100, at 27.2 -> 33.0 runs."""
    land = _land("FSDP=8", ("default",), _ag(AG_AT_ITS_END))
    runs = [replay(_inputs(land), land, random.Random(s)) for s in range(12)]
    assert not [r.verdict for r in runs if r.verdict.kind is VerdictKind.BOUNDED]
    found = [r for r in runs if r.verdict.recipe in ("ag256M", "agrs256M")]
    assert len(found) >= 11, [r.verdict.recipe for r in runs]
    gap_runs = [p for r in runs for p in r.planned if p.rule == "wave.family_gap"]
    assert gap_runs and all("a value may help on its own" in p.reason for p in gap_runs)
    assert max(len(r.results) for r in runs) <= 48


def test_a_catalog_spent_with_a_leader_reports_its_gain_from_runs_that_decided_nothing() -> None:
    """A verdict that names a recipe without the winner rule (the catalog spent, a leader
    significantly above +2 %) chose it among the others on the same runs it read its gain
    from: the block that decides nothing runs before it too (tests/test_xla_claims.py has
    the winner rule's)."""
    land = _land("FSDP=8", ("default",), {"NCCL_NCHANNELS_PER_NET_PEER=8": 1.035})
    small = ("hpas", "prs", "nch8", "qps8", "mem95")
    inp = replace(_inputs(land), catalog=tuple(p for p in _inputs(land).catalog
                                               if p.name in small))
    r = replay(inp, land, random.Random(0))
    v = r.verdict
    assert v.kind is VerdictKind.EXHAUSTED and v.recipe == "nch8", v
    assert [p.profile.name for p in r.planned if p.rule == REPORT] == ["nch8", "baseline"] * 2
    assert v.n == 2 and not v.conditional
    reasons = {"the catalog spent": v.reason}
    # A block that reads the gain within the noise of +2 %: not put forward as such.
    low = replay(inp, land, random.Random(8)).verdict
    assert low.kind is VerdictKind.EXHAUSTED and low.recipe == "nch8" and low.conditional
    reasons["read within the noise of +2% (conditional)"] = low.conditional_reason
    _reasons("gain_from_runs_that_decided_nothing", reasons)


def test_a_timebox_verdict_reads_its_gain_on_the_block_run_before_the_stop() -> None:
    """With the 8 h stop (here 6 h) a block away, the recipe the timebox verdict would name
    is measured on runs that decide nothing first, and the verdict reads its gain there."""
    land = _land("FSDP=8", ("default",), {"NCCL_NCHANNELS_PER_NET_PEER=8": 1.035})
    # Built on the baseline's mean (a still cell); read by the trend, +3.5 % at 6 h is not
    # significantly above +2 % in these seeds (the prior's drift widens a claim run hours
    # after the baseline's runs: docs/benchmarks.md, "Drift").
    inp = replace(_inputs(land), max_queue_hours=6, drift=DriftRead.MEAN)
    r = replay(inp, land, random.Random(5))
    v = r.verdict
    assert v.kind is VerdictKind.TIMEBOX and v.recipe == "nch8", v
    assert sum(p.rule == REPORT for p in r.planned) == 4
    assert isinstance(v, Decided) and v.said.gain is not None
    g = v.said.gain
    assert (g.source, g.n, g.baseline_n) == (GainSource.REPORT_BLOCK, 2, 2)


def _ok(profile: str, tgs: float, wave: int = 2, rule: str = "wave.catalog") -> Result:
    return Result(profile, "default", Outcome.OK, tgs, 28.0, queue_s=600.0, wave=wave,
                  rule=rule)


BASE3 = [_ok("baseline", 1000.0, 1, "wave1.baseline"),
         _ok("evidence", 990.0, 1, "wave1_5.evidence"),
         _ok("baseline", 1000.0, 3, "noise.rerun_baseline"),
         _ok("baseline", 1000.0, 3, "noise.rerun_baseline")]


def test_a_family_run_at_one_value_gets_its_values_before_wider_gaps_elsewhere() -> None:
    """Red team: only the overlap limit's end (ovl8, +6 %) helped, the family sat in the
    evidence's last mechanism and was run at ovl4 alone (flat); the time before the bounded
    verdict went to the interior values of the first mechanism's seven-value families,
    run at three values each, and ran out (found 55 % of 40 seeds). A family run at fewer
    values now goes first (82 %)."""
    from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence
    from sweepd.kinds.xla_tuning.search import profiles
    from sweepd.kinds.xla_tuning.waves.candidates import Candidates

    inp = _inputs(_land("FSDP=8", ("default",), {}))
    ran = ["ag256M", "ag768M", "ag4G", "ovl4"]
    board = build([*BASE3, *(_ok(p, 1000.0) for p in ran)], inp.noise, inp.max_flakes)
    ev = Evidence(((Cost.ALL_GATHER, 0.5), (Cost.COMPUTE, 0.4)), "HLO")
    cands = Candidates(inp, board, ev, profiles(inp))
    order = [it[0].name for it in cands.fill.untried_values(99)]
    assert order[:2] == ["ovl2", "ovl8"] or order[:2] == ["ovl8", "ovl2"], order
    assert "ag384M" in order and order.index("ag384M") > 1


def test_a_recipe_above_2_percent_but_not_significantly_is_measured_before_bounded() -> None:
    """Red team: a true +3.3 % read +2.2 % on its two fresh runs, short of significantly
    above +2 %, and "structurally bounded" fired: not shown above +2 % read as shown
    below. It is now re-run (to NEAR_BAR_N runs) before the cell may be bounded."""
    from sweepd.kinds.xla_tuning.search import profiles
    from sweepd.kinds.xla_tuning.waves.candidates import Candidates

    inp = _inputs(_land("FSDP=8", ("default",), {}))
    results = [*BASE3, _ok("dbuf", 1030.0), _ok("dbuf", 1022.0, 3, "noise.confirm"),
               _ok("dbuf", 1022.0, 3, "noise.confirm")]
    board = build(results, inp.noise, inp.max_flakes)
    assert not board.claim.above("dbuf", "default", inp.bounded_gain)
    cands = Candidates(inp, board, None, profiles(inp))
    again = [it for it in cands.steps.confirmations() if it[0].name == "dbuf"]
    assert again
    _reasons("confirm_above_the_bar", {"dbuf's confirmation": again[0][3]})
    assert again[0][2] == "noise.confirm"


def test_a_flag_that_runs_out_of_memory_alone_is_tried_beside_the_memory_fraction() -> None:
    """Red team: pipelined all-gather is +7 % but its compiled temp memory is 9 % larger,
    over the capacity at the default memory fraction and under it at .95. It was dropped
    on its OOM and the cell called bounded (60 of 60 seeds). Before a bounded verdict it
    now runs once on top of mem95, and the sweep names that stack."""
    pag = "xla_gpu_enable_pipelined_all_gather=true"
    land = _land("FSDP=8", ("default",), {pag: 1.07})
    land = land.model_copy(update={"effects": {**land.effects, pag: Effect(tgs=1.07, mem=1.09)},
                                   "flake_rate": 0.0})
    runs = [replay(_inputs(land), land, random.Random(s)) for s in range(6)]
    beside = [p for r in runs for p in r.planned if p.rule == "wave.oom_beside_memory"]
    assert beside and all(p.profile.name == "mem95+pag" for p in beside)
    assert "ran out of memory alone" in beside[0].reason
    named = [r.verdict.recipe for r in runs]
    assert sum({"mem95", "pag"} <= set((recipe or "").split("+")) for recipe in named) >= 5, \
        named


def test_at_15_minute_jobs_a_flag_that_ran_out_of_memory_still_runs_beside_more_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At the simulated cluster's own job length (~15 min: 8 h holds ~33 runs) the retry
    beside mem95 waited behind the catalog's fills and the spare runs kept before a
    bounded verdict, and never ran (red team: bounded or no change in 100 of 100 sweeps).
    It now runs once every mechanism has a first value."""
    from sweepd.kinds.xla_tuning import replay as replay_module

    monkeypatch.setattr(replay_module, "RUN_S", 880.0)
    pag = "xla_gpu_enable_pipelined_all_gather=true"
    land = _land("FSDP=8", ("default",), {pag: 1.07})
    land = land.model_copy(update={"effects": {**land.effects, pag: Effect(tgs=1.07, mem=1.09)},
                                   "flake_rate": 0.0})
    runs = [replay(_inputs(land), land, random.Random(s)) for s in range(6)]
    assert all(len(r.results) <= 34 for r in runs), [len(r.results) for r in runs]  # 8 h, 15 min
    # One sweep's 8 h ends before the memory mechanism has run at all (19 profiles).
    assert sum(any(p.rule == "wave.oom_beside_memory" for p in r.planned) for r in runs) >= 5
    assert sum(r.verdict.recipe == "mem95+pag" for r in runs) >= 3, \
        [r.verdict.recipe for r in runs]
    for r in runs:  # never "structurally bounded"; what the stop left open is named
        assert r.verdict.kind.value != "bounded", r.verdict
        if r.verdict.recipe is None and any(p.profile.name == "mem95+pag" for p in r.planned):
            assert isinstance(r.verdict, Decided)
            left_open = {c.data.get("profile") for c in r.verdict.said.caveats
                         if c.kind in OPEN_KINDS}
            assert "mem95+pag" in left_open, r.verdict.reason
