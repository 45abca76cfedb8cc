"""The xla-tuning planner's cell noise estimate and its endgame on the leading recipe."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import plan, profiles
from sweepd.kinds.xla_tuning.waves.candidates import Candidates

EVIDENCE = Evidence(((Cost.ALL_GATHER, 0.4), (Cost.COMPUTE, 0.5)), "job 1002 HLO")
PAR = Parallelism.parse("FSDP=8")
INP = Inputs(PAR, default_catalog(PAR), tags=("sparse",), stop="thorough")


def _ok(profile: str, tgs: float, wave: int = 2) -> Result:
    return Result(profile, "sparse", Outcome.OK, tgs, 28.0, queue_s=600, wave=wave)


def test_the_noise_is_the_cells_own_once_profiles_are_repeated() -> None:
    prior = 0.008
    assert build([_ok("baseline", 1000.0, 1)], prior, 3).noise == prior  # no repeat: prior
    loud = [_ok(p, t) for p in ("ag1G", "rs1G", "nch8") for t in (980.0, 1020.0)]
    quiet = [_ok(p, t) for p in ("ag1G", "rs1G", "nch8", "lhs", "hpas", "mem95")
             for t in (999.0, 1001.0, 1000.0)]
    noisy = build(loud, prior, 3)
    assert 0.012 < noisy.noise < 0.02  # +-2 % repeats: the deltas' error bars widen
    assert build(quiet, prior, 3).noise < prior / 1.9  # a quiet nodelist: small effects show
    wide, narrow = noisy.se("ag1G", "sparse"), build(quiet, prior, 3).se("ag1G", "sparse")
    assert wide > 3 * narrow


def _leader_board() -> list[Result]:
    """ag768M leads (+11 %, n=2); nch8 +1.5 % and lhs +0.2 % were measured once."""
    return [_ok("baseline", 1000.0, 1), _ok("baseline", 1000.0, 1), _ok("evidence", 990.0, 1),
            _ok("ag768M", 1110.0), _ok("ag768M", 1110.0, 3), _ok("nch8", 1015.0),
            _ok("lhs", 1002.0)]


def test_the_endgame_moves_the_leaders_value_and_adds_the_positive_singles() -> None:
    board = build(_leader_board(), INP.noise, INP.max_flakes)
    items = Candidates(INP, board, EVIDENCE, profiles(INP)).steps.polish()
    got = {(p.name, rule) for p, _, rule, _ in items}
    assert ("ag512M", "wave.polish_value") in got and ("ag1G", "wave.polish_value") in got
    assert ("ag768M+nch8", "wave.polish_add") in got
    assert not any("lhs" in name for name, _ in got)  # +0.2 %: below the stacking bar
    add = next(r for p, _, rule, r in items if p.name == "ag768M+nch8")
    assert "ag768M + nch8 (+1.50% alone)" in add


def test_the_endgame_waits_for_the_catalog_search_to_plateau() -> None:
    step = plan(INP, _leader_board(), EVIDENCE)
    assert isinstance(step, tuple) and step
    assert not {p.rule for p in step} & {"wave.polish_value", "wave.polish_add"}
    assert any(p.rule == "wave.catalog" for p in step)  # families still unseeded come first
