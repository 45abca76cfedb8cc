"""The flag-effect model and the default landscape built from xla-tuning-facts.md."""

from __future__ import annotations

import random

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Profile
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog, restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, RunKind, sample, truth


def _cat(land: Landscape) -> dict[str, Profile]:
    out = {p.name: p for p in default_catalog(Parallelism.parse(land.parallelism))}
    restore = restore_default(land.deployed_settings())
    if restore is not None:
        out[restore.name] = restore
    return out


def _delta(land: Landscape, names: str, tag: str = "sparse") -> float | None:
    cat = _cat(land)
    settings = tuple(s for n in names.split("+") for s in cat[n].settings)
    g = land.gain(settings, tag)
    return None if g is None else g - 1


def test_fsdp8_reproduces_the_measured_deltas() -> None:
    land = fsdp8()
    for names, measured in [("ag1G", 0.1160), ("ag512M", 0.1155), ("ag2G", 0.1067),
                            ("agrs384M", 0.1153), ("agrs1G", 0.0585), ("agrs4G", -0.0439),
                            ("nch8", 0.0426), ("ovl2", -0.0414), ("ovl8", -0.0519),
                            ("dbuf", -0.0269), ("dbuf+hpas", -0.0386), ("protoS", -0.0134),
                            ("nbuf", -0.0198)]:
        assert _delta(land, names) == pytest.approx(measured, abs=0.0006), names
    # Stacking NCCL channels on ag 1 GiB gave no gain; the dense path gains +20.5 %.
    assert _delta(land, "ag1G+nch8") == pytest.approx(0.116, abs=0.001)
    assert _delta(land, "ag1G", "dense") == pytest.approx(0.205, abs=0.001)
    assert _delta(land, "pag") is None and _delta(land, "par") is None  # OOM


def test_fsdp8_truth_is_the_all_gather_threshold() -> None:
    land = fsdp8()
    best = truth(land, tuple(_cat(land).values()))
    assert any(n.startswith("ag") for n in best.recipe)
    assert 1.116 <= best.gain <= 1.116 * 1.01  # within 1 % of the facts' +11.6 % winner


def test_pp8_reproduces_the_measured_deltas_and_sign_flips() -> None:
    land, fsdp = pp8(), fsdp8()
    for names, measured in [("ovl2", 0.0338), ("ovl2+hpas", 0.0470), ("protoS", 0.0334),
                            ("hpas", 0.0176), ("pp2p", -0.0531), ("ovl4", -0.0353),
                            ("nch8", -0.0174)]:
        assert _delta(land, names) == pytest.approx(measured, abs=0.0006), names
    cat = _cat(land)
    four = tuple(s for n in ("ovl2", "hpas", "cpd1G", "protoS") for s in cat[n].settings)
    assert (land.gain(four, "sparse") or 0) - 1 == pytest.approx(0.048, abs=0.003)
    # The env file's FSDP winner (ag 1 GiB) costs PP 1.0 % (sparse) and 6.6 % (dense).
    assert _delta(land, "restore_default") == pytest.approx(965.2 / 955.3 - 1, abs=1e-4)
    assert _delta(land, "restore_default", "dense") == pytest.approx(1156.9 / 1080.2 - 1,
                                                                     abs=1e-4)
    assert _delta(land, "ovl2", "dense") == pytest.approx(0.133, abs=0.001)
    assert _delta(land, "ovl2+hpas", "dense") == pytest.approx(1.133 * 0.973 - 1, abs=0.001)
    assert _delta(land, "par") is None and _delta(land, "pag") is None
    for flag in ("ovl2", "nch8", "protoS"):  # the sign flips FSDP=8 vs PP=8
        a, b = _delta(fsdp, flag), _delta(land, flag)
        assert a is not None and b is not None and a * b < 0, flag


def test_pp8_truth_is_overlap_plus_priority_without_the_fsdp_flag() -> None:
    land = pp8()
    best = truth(land, tuple(_cat(land).values()))
    assert {"ovl2", "hpas"} <= set(best.recipe)
    assert 1.05 <= best.gain <= 1.065


def test_yaml_round_trip_keeps_the_whole_model() -> None:
    for land in (fsdp8(), pp8()):
        assert Landscape.from_yaml(land.to_yaml()) == land


def test_samples_show_noise_oom_unknown_flags_and_flakes() -> None:
    land = pp8().model_copy(update={"unknown": frozenset({"NCCL_PROTO"}), "flake_rate": 0.0})
    cat, rng = _cat(land), random.Random(3)
    runs = [sample(land, cat["ovl2"].settings, "sparse", rng) for _ in range(200)]
    tgs = [r.tgs for r in runs if r.tgs is not None]
    mean = sum(tgs) / len(tgs)
    assert mean == pytest.approx(955.3 * 1.0338, rel=0.003)
    assert 0.004 < (max(tgs) - min(tgs)) / mean / 6 < 0.012  # ~0.8 % std
    oom = sample(land, cat["pag"].settings, "sparse", rng)
    assert oom.kind is RunKind.OOM and oom.detail == "302.0GiB"
    bad = sample(land, cat["protoS"].settings, "sparse", rng)
    assert bad.kind is RunKind.UNKNOWN_FLAG and bad.detail == "NCCL_PROTO"
    flaky = land.model_copy(update={"unknown": frozenset(), "flake_rate": 1.0})
    assert sample(flaky, (), "sparse", rng).kind is RunKind.FLAKE


def test_a_higher_memory_fraction_makes_room() -> None:
    land = pp8()
    cat = _cat(land)
    temp, cap = land.memory(cat["mem95"].settings, "sparse")
    assert cap == pytest.approx(288 * 0.95)
    assert land.memory((), "sparse")[1] == pytest.approx(288 * 0.93)
    assert temp == pytest.approx(178.0)


def test_pp8_all_gather_thresholds_cost_more_the_smaller_they_are() -> None:
    # Before, only 1 GiB had an effect on PP=8, so any other value undid the env file's
    # flag for free and the truth picked e.g. ag256M + hpas + ovl2.
    land = pp8()
    costs = [_delta(land, f"ag{v}") for v in ("256M", "384M", "512M", "768M", "1G", "2G", "4G")]
    assert costs[4] == pytest.approx(0.0)  # the env file's own value
    assert all(c is not None for c in costs)
    assert costs == sorted(costs)  # smaller threshold, more all-gathers, lower TGS
    dense = _delta(land, "ag256M", "dense")
    assert dense is not None and dense < 0
    best = truth(land, tuple(_cat(land).values()))
    assert set(best.recipe) == {"ovl2", "hpas", "restore_default"}
