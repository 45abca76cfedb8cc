"""A setting already in effect changes nothing: the simulator gives it no effect (XLA reads
`true` as the image's `True`), and the planner never runs a catalog profile made of such
settings (the image's value or the env file's), saying which it left out."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Parallelism, Setting
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import Planned, plan
from sweepd.kinds.xla_tuning.waves.in_effect import without_in_effect

LHS = "xla_gpu_enable_latency_hiding_scheduler"
DBUF = "xla_gpu_enable_while_loop_double_buffering"
NCH8 = "NCCL_NCHANNELS_PER_NET_PEER=8"
PHRASE = "already in effect (each setting the env file's or the image's value): "


def _land(**kw: object) -> Landscape:
    return Landscape.model_validate({
        "parallelism": "FSDP=8", "base_tgs": {"default": 1000.0}, "noise": 0.008,
        "effects": {f"{LHS}=true": {"tgs": 1.05}, f"{DBUF}=true": {"tgs": 0.97},
                    NCH8: {"tgs": 1.07}}, **kw})


def _inputs(land: Landscape) -> Inputs:
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings())


def _parts(planned: Iterable[Planned]) -> set[str]:
    return {part for p in planned for part in p.profile.name.split("+")}


def test_the_simulator_reads_true_on_the_images_True_as_no_change() -> None:
    land = _land(interactions=[{"members": [f"{LHS}=true", NCH8], "tgs": 1.1},
                               {"members": [LHS, NCH8], "tgs": 1.2}])
    lhs = Setting(LHS, "true", Layer.XLA)
    assert land.gain((lhs,), "default") == 1.0  # the image sets True: nothing changes
    assert land.gain((Setting(LHS, "false", Layer.XLA),), "default") == 1.0  # no effect given
    # An interaction naming `lhs=true` holds on the image's True; one naming the bare key
    # (any non-default value) does not.
    nch8 = Setting("NCCL_NCHANNELS_PER_NET_PEER", "8", Layer.ENV)
    assert land.gain((nch8,), "default") == land.gain((nch8, lhs), "default") \
        == pytest.approx(1.07 * 1.1)


def test_the_simulator_reads_an_env_files_TRUE_as_true_and_its_default_as_unset() -> None:
    land = _land(deployed=[f"{DBUF}=TRUE"])
    assert land.tgs((), "default") == 1000.0 * 0.97  # TRUE is the effect given for `true`
    assert land.gain((Setting(DBUF, "true", Layer.XLA),), "default") == 1.0
    # Putting it back to XLA's own default (false) is the image's job: no effect left.
    back = land.gain((Setting(DBUF, "false", Layer.XLA),), "default")
    assert back == pytest.approx(1 / 0.97)


def test_the_shipped_fsdp_cell_gives_lhs_no_effect() -> None:
    land = fsdp8()
    assert land.gain((Setting(LHS, "true", Layer.XLA),), "sparse") == 1.0
    assert not any(label.startswith(LHS) for label in land.effects)


def test_a_profile_equal_to_the_images_value_is_never_run() -> None:
    """lhs sets the image's own value: it is left out (and, given an effect by mistake,
    could not win)."""
    land = _land()
    for seed in range(3):
        r = replay(_inputs(land), land, random.Random(seed))
        assert "lhs" not in _parts(r.planned)
        assert r.verdict.reason.endswith(PHRASE + "lhs"), r.verdict.reason


def test_a_cell_whose_env_file_sets_a_catalog_value_does_not_run_that_profile() -> None:
    """The red team's cell: the env file sets double buffering, the catalog's `dbuf` ran
    as a baseline under another name and was listed "dbuf +0.40 %"."""
    land = _land(deployed=[f"{DBUF}=true"])
    inp = _inputs(land)
    for seed in range(3):
        r = replay(inp, land, random.Random(seed))
        ran = _parts(r.planned)
        assert "dbuf" not in ran and "lhs" not in ran
        assert "restore_default" in ran  # the env file's flag taken out is still measured
        assert r.verdict.reason.endswith(PHRASE + "dbuf, lhs"), r.verdict.reason


def test_a_numeric_familys_deployed_value_is_simply_not_a_candidate() -> None:
    """PP=8's env file carries all-gather 1 GiB: ag1G is never run; the family's other
    values stay candidates (one of ag1G's neighbours, 768M or 2G, runs)."""
    land = pp8()
    seen: set[str] = set()
    for seed in range(4):
        r = replay(_inputs(land), land, random.Random(seed))
        assert "ag1G" not in _parts(r.planned)
        seen |= _parts(r.planned)
        assert "ag1G, lhs" in r.verdict.reason, r.verdict.reason
    assert {"ag768M", "ag2G"} & seen, seen


def test_a_profile_the_sweep_already_ran_stays() -> None:
    """A sweep begun before the rule has lhs's result: it is read, not refused."""
    inp = _inputs(_land())
    done = [Result(p, "default", Outcome.OK, 1000.0, 28.0, queue_s=600.0, wave=w, rule=rule)
            for p, w, rule in (("baseline", 1, "wave1.baseline"),
                               ("evidence", 1, "wave1_5.evidence"),
                               ("baseline", 2, "noise.rerun_baseline"),
                               ("lhs", 2, "wave.catalog"), ("lhs+nch8", 3, "wave.stack"))]
    step = plan(inp, done, None)
    assert isinstance(step, tuple) and step
    assert "lhs" not in _parts(step)  # run already, not planned again


def test_leaving_out_twice_keeps_the_names() -> None:
    """The engine leaves them out before the search does it again: the verdict still names
    them."""
    inp = without_in_effect(_inputs(_land(deployed=[f"{DBUF}=true"])))
    assert inp.in_effect == ("dbuf", "lhs")
    assert without_in_effect(inp) == inp
    assert {"dbuf", "lhs"}.isdisjoint(p.name for p in inp.catalog)
