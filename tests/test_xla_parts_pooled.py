"""Issue 21, the real cells in seed mode: a real part of the truth is not left out on one
noisy comparison. PP=8's truth is ovl2 + async priority + restore_default (+5.79 %); in about
one replay in ten restore_default or async priority (each ~+1 point) was left out, because
the stack without it was read on its selecting run, or because the stack against the stack
without it is one comparison where the part was measured in several contexts."""

from __future__ import annotations

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import Pruned, profiles, pruned
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from tests.golden_files import GOLDEN, check_golden_cases

EV = Evidence(((Cost.COLLECTIVE_PERMUTE, 0.3), (Cost.BUBBLE, 0.22)), "job 1002 HLO")
TRIPLE = "hpas+ovl2+restore_default"


def _inputs(land: Landscape) -> Inputs:
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings())


def _r(profile: str, tgs: float, rule: str, wave: int = 3) -> Result:
    return Result(profile, "sparse", Outcome.OK, tgs, 30.0, queue_s=600.0, wave=wave, rule=rule)


def _base() -> list[Result]:
    return [_r("baseline", 1000.0, "wave1.baseline", 1),
            _r("baseline", 1000.0, "noise.rerun_baseline", 3),
            _r("baseline", 1000.0, "noise.rerun_baseline", 3)]


def _prune(land: Landscape, results: list[Result], name: str) -> tuple[Board, Pruned]:
    inp = _inputs(land)
    board = build(results, inp.noise, inp.max_flakes)
    return board, pruned(inp, board, Candidates(inp, board, EV, profiles(inp)), name)


def test_the_stack_without_a_part_is_not_read_on_its_selecting_run() -> None:
    # hpas+ovl2 was put forward on +7.0 % and a part check read +6.6 %; its three claim
    # runs came in at +4.6..+4.8 % (its truth is +4.70 %). The triple re-ran at +5.8/+6.0 %.
    # Before: the pair was read on its selecting run and the part check (+6.8 %), the
    # triple 0.9 points below it, and restore_default left out as "no measured help".
    runs = [*_base(),
            _r("hpas+ovl2", 1070.0, "wave.stack"), _r("hpas+ovl2", 1066.0, "verdict.part_check"),
            _r("hpas+ovl2", 1046.0, "noise.confirm"), _r("hpas+ovl2", 1047.0, "noise.confirm"),
            _r("hpas+ovl2", 1048.0, "noise.confirm"),
            _r(TRIPLE, 1062.0, "wave.stack"), _r(TRIPLE, 1058.0, "verdict.part_check"),
            _r(TRIPLE, 1060.0, "verdict.part_check")]
    board, p = _prune(pp8(), runs, TRIPLE)
    assert board.delta("hpas+ovl2", "sparse") == pytest.approx(0.068)  # what it was read on
    assert p.name == TRIPLE, p.left_out
    assert not any(x.startswith("restore_default") for x in p.left_out)


def _pp8_contexts(triple_reruns: tuple[float, ...]) -> list[Result]:
    # restore_default measured on its own (+1.0 %, twice), on ovl2 (+1.0 points) and on
    # hpas (+1.0 points); hpas on ovl2 +1.3 points. The triple against the pair alone:
    # its re-runs at +4.6 % against the pair's +4.7 %.
    return [*_base(),
            _r("restore_default", 1010.0, "wave1.restore_default", 1),
            _r("restore_default", 1010.0, "noise.rerun"),
            _r("ovl2", 1034.0, "wave.catalog", 2), _r("ovl2", 1034.0, "noise.rerun"),
            _r("ovl2+restore_default", 1044.0, "wave.stack"),
            _r("ovl2+restore_default", 1044.0, "verdict.part_check"),
            _r("hpas", 1018.0, "wave.catalog", 2), _r("hpas", 1018.0, "noise.rerun"),
            _r("hpas+restore_default", 1028.0, "wave.stack"),
            _r("hpas+restore_default", 1028.0, "verdict.part_check"),
            _r("hpas+ovl2", 1047.0, "wave.stack"), _r("hpas+ovl2", 1047.0, "noise.rerun"),
            _r("hpas+ovl2", 1047.0, "verdict.part_check"),
            _r("hpas+ovl2", 1047.0, "verdict.part_check"),
            _r(TRIPLE, 1058.0, "wave.stack"),
            *(_r(TRIPLE, x, "verdict.part_check") for x in triple_reruns)]


def test_a_part_measured_in_several_contexts_of_the_stack_is_kept() -> None:
    # One comparison says restore_default adds -0.1 points (the triple's re-runs read low);
    # the part's three other contexts inside the stack each say +1.0 point. Before: left
    # out on the one comparison ("no measured help"), the verdict +4.70 % where +5.79 % was
    # in hand.
    _, p = _prune(pp8(), _pp8_contexts((1046.0, 1046.0)), TRIPLE)
    assert p.name == TRIPLE, p.left_out
    assert not p.left_out


def test_a_context_that_disagrees_with_the_stack_is_not_pooled() -> None:
    # FSDP=8's NCCL channels add +4.3 % on mem .95 and nothing on top of the all-gather
    # threshold (the facts file's nch8 + ag 1 GiB). On ag1G+mem95 they add nothing, as on
    # ag1G: the mem95 context disagrees with the stack's own comparison by far more than the
    # gate and is not pooled (pooled, it would keep nch8 at several se); the ag1G context
    # agrees and is. The part alone against the baseline is no context at all.
    runs = [*_base(),
            _r("nch8", 1043.0, "wave.catalog", 2), _r("nch8", 1043.0, "noise.rerun"),
            _r("mem95", 1004.0, "wave.catalog", 2), _r("mem95", 1004.0, "noise.rerun"),
            _r("mem95+nch8", 1047.0, "wave.stack"), _r("mem95+nch8", 1047.0, "noise.rerun"),
            _r("ag1G", 1116.0, "wave.catalog", 2), _r("ag1G", 1116.0, "noise.rerun"),
            _r("ag1G", 1116.0, "noise.rerun"),
            _r("ag1G+nch8", 1116.0, "wave.stack"), _r("ag1G+nch8", 1116.0, "noise.rerun"),
            *(_r("ag1G+mem95", 1120.0, "wave.stack") for _ in range(4)),
            _r("ag1G+mem95+nch8", 1121.0, "wave.stack"),
            *(_r("ag1G+mem95+nch8", 1120.0, "verdict.part_check") for _ in range(3))]
    _, p = _prune(fsdp8(), runs, "ag1G+mem95+nch8")
    assert p.name == "ag1G+mem95", p
    assert p.left_out and p.left_out[0].startswith("nch8 ("), p.left_out
    # ag1G's other context; not mem95's.
    check_golden_cases(GOLDEN / "xla_parts_pooled" / "left_out.txt", {
        "ag1G+mem95+nch8 pruned": "\n".join(p.left_out)})
