"""End to end (issue 21, "Prove it twice"): the simulated cluster's jobs source a real env
file from a toolkit checkout (`tuning.toolkit`), the verdict's patch is applied to that file
as `report --apply` writes it, and baseline-deployed jobs on the patched file against the old
one measure the verdict's gain (within two standard errors)."""

from __future__ import annotations

import math
import random
import re
import statistics
from pathlib import Path

import pytest
import yaml

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import pp8
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, OVERLAP_LIMIT, default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.hooks_apply import apply_env_patch
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.logread import parse_flags
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.sim.tuning import parallelism_overrides
from sweepd.sim.__main__ import main

MODEL = "deepseek3-671b"
NODES = "n[01-08]"
ENV_FILE = ("# Per-model environment overrides (sourced after train_env.sh).\n"
            f'XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}--{AG}={GIB}"\nexport XLA_FLAGS\n')
STEP = re.compile(r"^0: completed step: (\d+), .*Tokens/s/device: ([\d.]+),")
PP8 = [f"{k}={v}" for k, v in parallelism_overrides("PP=8").items()]
RUNS = 4


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("XLA_FLAGS", "OUTPUT_PATH", "ENABLE_XLA_DUMP", "NCCL_PROTO"):
        monkeypatch.delenv(key, raising=False)


def dense_pp8() -> Landscape:
    """The facts file's PP=8 cell, dense path, where the env file's ag = 1 GiB costs 6.6 %."""
    land = pp8()
    return land.model_copy(update={"tags": ("dense",), "deployed": (f"{AG}={GIB}",)})


def setup(tmp_path: Path, land: Landscape | None = None, env_text: str = ENV_FILE
          ) -> tuple[Path, Path]:
    configs = tmp_path / "maxtext" / "configs"
    configs.mkdir(parents=True)
    (configs / f"{MODEL}.gpu.yml").write_text("base_config: base.yml\n")
    env = configs / f"{MODEL}.env.sh"
    env.write_text(env_text)
    land = land or dense_pp8()
    data = {"cluster": {"nodes": NODES, "gpu": "MI355X", "gpu_memory_gib": 288,
                        "time_scale": 0.00001, "seed": 11},
            "tuning": {"model": MODEL, "landscapes": [land.model_dump(mode="json")],
                       "tags": {tag: {} for tag in land.tags}, "toolkit": "maxtext"}}
    sc = tmp_path / "scenario.yaml"
    sc.write_text(yaml.safe_dump(data))
    return sc, env


def job(tmp_path: Path, sc: Path, job_id: int) -> tuple[float, dict[str, str]]:
    """One baseline-deployed job (no profile): its steady TGS and the flags it printed."""
    log = tmp_path / "out" / f"{job_id}-JAX-{MODEL}.log"
    code = main(["train", "--scenario", str(sc), "--model", MODEL, "--job-id", str(job_id),
                 "--job-name", f"JAX-{MODEL}", "--nodes", NODES, "--all-ranks", "--log",
                 str(log), "--state-dir", str(tmp_path / "state"), "--", "steps=15", *PP8])
    lines = log.read_text().splitlines()
    assert code == 0, lines[-5:]
    tgs = {int(m[1]): float(m[2]) for m in map(STEP.match, lines) if m}
    shown = [ln.split("XLA_FLAGS=", 1)[1] for ln in lines if ln.startswith("0: XLA_FLAGS=")]
    return statistics.fmean(tgs[s] for s in range(5, 15)), parse_flags(shown[-1])


def test_the_applied_patch_measures_the_verdicts_gain_on_the_simulated_cluster(
        tmp_path: Path) -> None:
    sc, env = setup(tmp_path)
    land = dense_pp8()
    inp = Inputs(Parallelism.parse("PP=8"), default_catalog(Parallelism.parse("PP=8")),
                 tags=("dense",), deployed=land.deployed_settings())
    played = replay(inp, land, random.Random(0))
    verdict = played.verdict
    assert verdict.recipe is not None and "restore_default" in verdict.recipe.split("+")
    board = build(played.results, inp.noise, inp.max_flakes)
    parts = deploy.parts(verdict.recipe, profiles(inp), {})

    old = [job(tmp_path, sc, 100 + i) for i in range(RUNS)]
    assert all(flags[AG] == str(GIB) for _, flags in old)   # the checkout's file, sourced
    apply_env_patch(env, MODEL, Parallelism.parse("PP=8"), [f"# {verdict.recipe}"],
                    deploy.body(parts))
    new = [job(tmp_path, sc, 200 + i) for i in range(RUNS)]
    assert all(flags[AG] == str(8 * GIB) for _, flags in new)   # restore_default deployed
    if any(s.key == OVERLAP_LIMIT for p in parts for s in p.settings):
        assert all(OVERLAP_LIMIT in flags for _, flags in new)

    a, b = [t for t, _ in old], [t for t, _ in new]
    measured = statistics.fmean(b) / statistics.fmean(a) - 1
    se_measured = math.sqrt(statistics.variance(a) / RUNS + statistics.variance(b) / RUNS
                            ) / statistics.fmean(a)
    se_verdict = board.se(verdict.recipe, "dense") or 0.0
    assert verdict.gain is not None
    se = math.hypot(se_measured, se_verdict)
    assert abs(measured - verdict.gain) <= 2 * se, (measured, verdict.gain, se)


DBUF = "xla_gpu_enable_while_loop_double_buffering"


def test_a_harmful_flag_the_image_does_not_set_is_taken_out_as_measured(
        tmp_path: Path) -> None:
    """The env file turns on double buffering, which the image leaves to XLA (off) and which
    costs 7 % here: restore_default appends XLA's own default, so the verdict measures
    taking it out, and the patch `--apply` writes takes it out of the jobs it runs, with
    the gain the verdict reported (red team: the flag had no image default, so it was
    never measured and the applied patch kept it)."""
    land = pp8().model_copy(update={"tags": ("dense",), "deployed": (f"{DBUF}=true",),
                                    "effects": {**pp8().effects, f"{DBUF}=true":
                                                pp8().effects[f"{DBUF}=true"].model_copy(
                                                    update={"tgs": 0.93})}})
    env_text = ("# Per-model environment overrides (sourced after train_env.sh).\n"
                f'XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}--{DBUF}=true"\nexport XLA_FLAGS\n')
    sc, env = setup(tmp_path, land, env_text)
    inp = Inputs(Parallelism.parse("PP=8"), default_catalog(Parallelism.parse("PP=8")),
                 tags=("dense",), deployed=land.deployed_settings())
    played = replay(inp, land, random.Random(0))
    verdict = played.verdict
    assert verdict.recipe is not None and "restore_default" in verdict.recipe.split("+")
    parts = deploy.parts(verdict.recipe, profiles(inp), {})
    body = deploy.body(parts)
    assert any(f"--{DBUF}=false" in line for line in body), body

    old = [job(tmp_path, sc, 100 + i) for i in range(RUNS)]
    assert all(flags[DBUF] == "true" for _, flags in old)
    apply_env_patch(env, MODEL, Parallelism.parse("PP=8"), [f"# {verdict.recipe}"], body)
    new = [job(tmp_path, sc, 200 + i) for i in range(RUNS)]
    assert all(flags[DBUF] == "false" for _, flags in new)
    a, b = [t for t, _ in old], [t for t, _ in new]
    measured = statistics.fmean(b) / statistics.fmean(a) - 1
    se = math.sqrt(statistics.variance(a) / RUNS + statistics.variance(b) / RUNS
                   ) / statistics.fmean(a)
    se_verdict = build(played.results, inp.noise, inp.max_flakes).se(verdict.recipe,
                                                                      "dense") or 0.0
    assert verdict.gain is not None and measured > 0.05
    assert abs(measured - verdict.gain) <= 2 * math.hypot(se, se_verdict), (
        measured, verdict.gain)
