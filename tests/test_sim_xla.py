"""The simulated trainer under a tuning landscape (kinds/xla_tuning/sim/): the flags
it prints, the memory line, unknown-flag aborts, OOMs, flakes, steady TGS and the HLO dump."""

from __future__ import annotations

import random
import re
import statistics
from pathlib import Path

import pytest
import yaml

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Layer, Setting
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, OVERLAP_LIMIT
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, RunKind, sample
from sweepd.kinds.xla_tuning.evidence.logread import (
    applied,
    effective,
    hlo_evidence,
    unknown_flags_in,
)
from sweepd.kinds.xla_tuning.sim.hlo import FILE_NAME
from sweepd.kinds.xla_tuning.sim.tuning import (
    TUNING_SCENARIO,
    ground_truth,
    parallelism_overrides,
    truth_line,
    tuning_for,
)
from sweepd.kinds.xla_tuning.sim.tuningjob import IMAGE_XLA_FLAGS, resolve
from sweepd.monitor.facts import FailureClass, SignalFact
from sweepd.monitor.parse import parse_line
from sweepd.monitor.signatures import match_signature
from sweepd.sim.__main__ import main
from sweepd.sim.scenario import ScenarioError, load_scenario
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed

NODES = "chi[2832,2863]"
# The simulated job's lines that imitate the toolkit's and XLA's own, one golden file a test.
GOLDEN_DIR = GOLDEN / "xla_sim_logs"
# The flag the default tuning scenario's image does not know (and the tests' scenarios name).
UNKNOWN = "xla_gpu_enable_async_collective_permute"
SPARSE = ["sparse_matmul=true", "use_turbo_grouped_gemm=true", "use_deepep_dispatch=true"]
FSDP = ["dcn_fsdp_parallelism=8", "dcn_pipeline_parallelism=1"]
PP = ["dcn_pipeline_parallelism=8", "dcn_fsdp_parallelism=1"]
STEP = re.compile(r"^0: completed step: (\d+), seconds: ([\d.]+), .*Tokens/s/device: ([\d.]+),")
MEMORY = re.compile(r"^0: Total memory size: ([\d.]+) GB, Output size: ([\d.]+) GB, "
                    r"Temp size: ([\d.]+) GB, Argument size: ([\d.]+) GB, "
                    r"Host temp size: ([\d.]+) GB\.$")


def scenario(tmp_path: Path, **tuning: object) -> Path:
    data = {"cluster": {"nodes": NODES, "gpu": "MI355X", "gpu_memory_gib": 288,
                        "time_scale": 0.00001, "seed": 5},
            "tuning": {"landscapes": "default", **tuning}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def train(tmp_path: Path, sc: Path, *args: str, job_id: str = "100",
          flags: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None,
          ) -> tuple[int, list[str]]:
    if monkeypatch is not None and flags is not None:
        monkeypatch.setenv("XLA_FLAGS", flags)   # what sweepd appended to the job's env
    log = tmp_path / "out" / f"{job_id}-JAX-deepseek3-671b.log"
    code = main(["train", "--scenario", str(sc), "--model", "deepseek3-671b", "--job-id", job_id,
                 "--job-name", "JAX-deepseek3-671b", "--nodes", NODES, "--all-ranks", "--log",
                 str(log), "--state-dir", str(tmp_path / "state"), "--", "steps=15", *args])
    return code, log.read_text().splitlines()


def having(lines: list[str], key: str) -> str:
    """The job's lines that hold `key`, as one text for a golden file."""
    return "\n".join(ln for ln in lines if key in ln)


def steps(lines: list[str]) -> dict[int, tuple[float, float]]:
    return {int(m[1]): (float(m[2]), float(m[3])) for m in map(STEP.match, lines) if m}


def steady(lines: list[str], lo: int = 5) -> float:
    found = steps(lines)
    return statistics.fmean(found[s][1] for s in range(lo, 15))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("XLA_FLAGS", "OUTPUT_PATH", "ENABLE_XLA_DUMP", "NCCL_PROTO"):
        monkeypatch.delenv(key, raising=False)


def test_prints_image_flags_then_effective_ones_with_appended_flags_winning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    appended = f"--{AG}={GIB}"
    code, lines = train(tmp_path, scenario(tmp_path), *FSDP, *SPARSE, "_env_NCCL_PROTO=Simple",
                        flags=appended, monkeypatch=monkeypatch)
    assert code == 0
    assert f"0: XLA_FLAGS={IMAGE_XLA_FLAGS}" in lines      # the image's inherited flags
    assert f"1: XLA_FLAGS={IMAGE_XLA_FLAGS}" in lines
    check_golden_cases(GOLDEN_DIR / "extracted_env.txt", {
        "Extracted env": having(lines, "Extracted env")})
    assert f"0: XLA_FLAGS={IMAGE_XLA_FLAGS} {appended}" in lines   # printenv: last wins
    eff = effective(lines)
    assert eff.xla[AG] == str(GIB) and eff.env["NCCL_PROTO"] == "Simple"
    assert eff.env["NCCL_NCHANNELS_PER_NET_PEER"] == "4"          # the toolkit's default
    profile = (Setting(AG, str(GIB)), Setting("NCCL_PROTO", "Simple", Layer.ENV))
    assert applied(profile, eff) == (True, None)
    assert not any("Unknown flag" in line for line in lines)
    # The env dump trips no failure signature (the monitor reads every line).
    assert not [ln for ln in lines if isinstance(parse_line(ln), SignalFact)]


def test_env_file_last_makes_a_profile_lose_and_the_reader_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    restore = f"--{AG}={8 * GIB}"          # PP=8's env file sets ag=1 GiB; put it back
    said: dict[str, str] = {}
    for last, wins in ((False, True), (True, False)):
        sc = scenario(tmp_path, env_file_last=last)
        code, lines = train(tmp_path, sc, *PP, flags=restore, monkeypatch=monkeypatch,
                            job_id=f"20{int(last)}")
        assert code == 0
        said[f"env_file_last {last}"] = having(lines, "per-model env")
        ok, culprit = applied((Setting(AG, str(8 * GIB)),), effective(lines))
        assert ok is wins
        if not wins:
            assert culprit is not None and f"{AG}={GIB} won" in culprit
    check_golden_cases(GOLDEN_DIR / "per_model_env_loaded.txt", said)


def test_passthrough_xla_flags_replace_the_whole_value(tmp_path: Path) -> None:
    code, lines = train(tmp_path, scenario(tmp_path), *FSDP, f"_env_XLA_FLAGS=--{AG}={GIB}")
    assert code == 0
    eff = effective(lines)
    assert eff.xla == {AG: str(GIB)}        # the toolkit re-exports it last: image flags gone


def test_memory_line_and_steady_tgs_follow_the_landscape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    land = fsdp8()
    settings = (Setting(AG, str(GIB)),)
    code, lines = train(tmp_path, scenario(tmp_path), *FSDP, *SPARSE, flags=settings[0].text,
                        monkeypatch=monkeypatch)
    assert code == 0
    temp, cap = land.memory(settings, "sparse")
    mem = [m for m in map(MEMORY.match, lines) if m]
    assert mem and float(mem[0][3]) == pytest.approx(temp, abs=0.05)
    assert float(mem[0][4]) == land.argument_gib and float(mem[0][2]) == land.output_gib
    assert f"0: \tUsing (GB) {land.argument_gib:.1f} / {cap:.1f}" in " ".join(lines)
    # The steady window's mean is exactly the run's sample (noise included) ...
    spec = tuning_for(load_scenario(scenario(tmp_path)).section("tuning"), "deepseek3-671b")
    assert spec is not None
    run = resolve(spec, 5, "100", "deepseek3-671b", dict(s.split("=") for s in FSDP + SPARSE), {},
                  {"XLA_FLAGS": settings[0].text})
    assert run.outcome.kind is RunKind.OK and run.tag == "sparse"
    assert steady(lines) == pytest.approx(run.outcome.tgs, rel=1e-4)
    # ... and across runs it sits on the landscape's true factor, within its noise.
    truth = land.tgs(settings, "sparse")
    runs = [train(tmp_path, scenario(tmp_path), *FSDP, *SPARSE, job_id=str(300 + i),
                  flags=settings[0].text, monkeypatch=monkeypatch) for i in range(6)]
    ok_means = [steady(lines) for code, lines in runs if code == 0]   # a flake has no steps
    assert len(ok_means) >= 4
    assert statistics.fmean(ok_means) == pytest.approx(truth, rel=3 * land.noise)
    assert truth / land.tgs((), "sparse") == pytest.approx(1.116, abs=0.001)


def test_parallelism_and_config_tag_pick_the_landscape(tmp_path: Path) -> None:
    sc = load_scenario(scenario(tmp_path)).tuning
    assert sc is not None
    over = parallelism_overrides("PP=8")
    assert over == {"dcn_fsdp_parallelism": "1", "dcn_pipeline_parallelism": "8"}
    assert sc.landscape_for(over).parallelism == "PP=8"
    assert sc.landscape_for({}).parallelism == "FSDP=8"       # the config's own
    land = sc.landscape_for(over)
    assert sc.tag_for(land, {**over, "sparse_matmul": "true", "use_turbo_grouped_gemm": "true",
                             "use_deepep_dispatch": "true"}) == "sparse"
    assert sc.tag_for(land, over) == "dense"
    with pytest.raises(ValueError, match="no tuning landscape for parallelism PP=4"):
        sc.landscape_for({"dcn_pipeline_parallelism": "4"})
    code, lines = train(tmp_path, scenario(tmp_path), "dcn_pipeline_parallelism=4")
    assert code == 1
    check_golden_cases(GOLDEN_DIR / "no_landscape.txt", {"ValueError": having(lines, "Error")})


def test_unknown_flag_aborts_at_startup_with_the_real_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = scenario(tmp_path, unknown_flags=[UNKNOWN])
    flags = f"--{OVERLAP_LIMIT}=2 --{UNKNOWN}=true"
    code, lines = train(tmp_path, sc, *PP, flags=flags, monkeypatch=monkeypatch)
    assert code == 1
    abort = [ln for ln in lines if "Unknown flags in XLA_FLAGS:" in ln]
    assert len(abort) == 2
    check_golden_cases(GOLDEN_DIR / "unknown_flag_abort.txt", {"abort": "\n".join(abort)})
    assert unknown_flags_in(lines) == (UNKNOWN,)
    assert match_signature(abort[0]) == (FailureClass.UNKNOWN_FLAG, f"--{UNKNOWN}")
    assert not steps(lines) and not any(MEMORY.match(ln) for ln in lines)


def test_oom_prints_the_compiled_memory_then_the_allocation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = "--xla_gpu_enable_pipelined_all_gather=true"   # PP=8: 302 GiB temp
    code, lines = train(tmp_path, scenario(tmp_path), *PP, flags=flag, monkeypatch=monkeypatch)
    assert code == 1
    mem = [m for m in map(MEMORY.match, lines) if m]
    assert mem and float(mem[0][3]) == pytest.approx(302.0, abs=0.05)
    oom = [ln for ln in lines if "RESOURCE_EXHAUSTED" in ln]
    assert oom
    check_golden_cases(GOLDEN_DIR / "oom.txt", {"RESOURCE_EXHAUSTED": "\n".join(oom)})
    assert match_signature(oom[0]) == (FailureClass.OOM, "302.00GiB")
    assert not steps(lines)


def _flaking_job(tmp_path: Path) -> str:
    spec = load_scenario(scenario(tmp_path)).tuning
    assert spec is not None
    over = dict(s.split("=") for s in FSDP)
    return next(str(i) for i in range(1000, 3000)
                if resolve(spec, 5, str(i), "deepseek3-671b", over, {}, {}).outcome.kind
                is RunKind.FLAKE)


def test_a_flake_dies_in_the_coordination_service(tmp_path: Path) -> None:
    code, lines = train(tmp_path, scenario(tmp_path), *FSDP, job_id=_flaking_job(tmp_path))
    assert code == 1
    check_golden_cases(GOLDEN_DIR / "flake.txt", {
        "DEADLINE_EXCEEDED": having(lines, "DEADLINE_EXCEEDED")})
    assert not steps(lines)


def test_evidence_run_dumps_hlo_whose_collectives_carry_the_evidence(tmp_path: Path) -> None:
    args = [*PP, "profiler=xplane", "skip_first_n_steps_for_profiler=10", "profiler_steps=3",
            "_env_ENABLE_XLA_DUMP=1", "jax_distributed_heartbeat_timeout_seconds=99999"]
    code, lines = train(tmp_path, scenario(tmp_path), *args, job_id="400")
    assert code == 0
    dump = tmp_path / "out" / "400-JAX-deepseek3-671b" / "xla_dump"
    check_golden_cases(GOLDEN_DIR / "xla_dump.txt", {
        "[XLA dump]": scrubbed(having(lines, "[XLA dump]"), dump=dump)})
    assert effective(lines).xla["xla_dump_to"] == str(dump)
    assert "xla_dump_to" not in effective(lines, rank=1).xla      # rank 0 only dumps
    files = sorted(dump.glob("module_*.jit_train_step.*_gpu_after_optimizations.txt"))
    assert [f.name for f in files] == [FILE_NAME]
    text = files[0].read_text()
    assert "collective-permute-start" in text and "all-gather-start" in text
    found = steps(lines)
    step_s = statistics.fmean(found[s][0] for s in range(9, 15))
    ev = dict(hlo_evidence(text, step_s).shares)
    for cost, share in pp8().evidence.items():
        if cost not in (Cost.COMPUTE, Cost.BUBBLE):
            assert ev[cost] == pytest.approx(share, abs=0.005)
    assert hlo_evidence(text, step_s).dominant()[0] is Cost.COLLECTIVE_PERMUTE


def test_no_dump_without_the_flag_and_none_after_an_abort(tmp_path: Path) -> None:
    code, _ = train(tmp_path, scenario(tmp_path), *FSDP, job_id="500")
    assert code == 0 and not list((tmp_path / "out").rglob("module_*"))


def test_one_rank_mode_prints_and_dumps_on_rank_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("OUTPUT_PATH", str(tmp_path / "job"))
    code = main(["train", "--scenario", str(scenario(tmp_path)), "--model", "deepseek3-671b",
                 "--job-id", "601", "--job-name", "JAX-x", "--nodes", NODES, "--state-dir",
                 str(tmp_path / "state"), "--", *FSDP, "_env_ENABLE_XLA_DUMP=1"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and f"XLA_FLAGS={IMAGE_XLA_FLAGS}" in out
    assert (tmp_path / "job" / "xla_dump" / FILE_NAME).is_file()


def test_scenario_landscapes_inline_or_from_a_file(tmp_path: Path) -> None:
    small = Landscape(parallelism="TP=8", base_tgs={"default": 500.0},
                      unknown=frozenset({"xla_bad"}))
    (tmp_path / "tp.yaml").write_text(small.to_yaml())
    sc = scenario(tmp_path, landscapes=["tp.yaml", fsdp8().model_dump(mode="json")])
    spec = load_scenario(sc).tuning
    assert spec is not None
    assert [c.parallelism for c in spec.cells()] == ["TP=8", "FSDP=8"]
    assert spec.landscape_for({"ici_tensor_parallelism": "8"}).unknown == {"xla_bad"}
    bad = scenario(tmp_path, landscapes=["missing.yaml"])
    with pytest.raises(ScenarioError, match="cannot read landscape file"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match=r"tuning\.landscapes"):
        load_scenario(scenario(tmp_path, landscapes=[]))


def test_default_tuning_scenario_and_its_ground_truth() -> None:
    spec = load_scenario(TUNING_SCENARIO).tuning
    assert spec is not None and spec.model == "deepseek3-671b"
    cells = {(c.parallelism, c.tag): c for c in ground_truth(spec)}
    assert set(cells) == {("FSDP=8", "sparse"), ("FSDP=8", "dense"), ("PP=8", "sparse"),
                          ("PP=8", "dense")}
    fsdp = cells["FSDP=8", "sparse"]
    assert "ag1G" in fsdp.recipe and f"{AG}={GIB}" in fsdp.settings
    assert fsdp.gain > 1.116 and len(fsdp.recipe) <= 3
    assert f"{OVERLAP_LIMIT}=2" in cells["PP=8", "sparse"].settings
    line = truth_line(spec)
    assert line.startswith("ground truth: FSDP=8/sparse: ") and "PP=8/dense" in line
    assert UNKNOWN in spec.cells()[0].unknown


def test_landscape_sample_is_what_the_job_runs(tmp_path: Path) -> None:
    """The job's outcome is `Landscape.sample` on its effective settings (same seed)."""
    spec = load_scenario(scenario(tmp_path)).tuning
    assert spec is not None
    run = resolve(spec, 5, "700", "deepseek3-671b", {}, {}, {})
    again = sample(run.landscape, run.settings, run.tag, random.Random("5:700:tuning"))
    assert again == run.outcome


@pytest.mark.parametrize("bad", ["_env_XLA_PYTHON_CLIENT_MEM_FRACTION=abc",
                                 "dcn_fsdp_parallelism=eight", "per_device_batch_size=0"])
def test_unreadable_settings_fail_the_job_with_a_python_error(tmp_path: Path, bad: str) -> None:
    code, lines = train(tmp_path, scenario(tmp_path), bad)
    assert code == 1
    assert any(line.startswith("0: ValueError: ") for line in lines)
    assert not steps(lines)


def test_the_simulator_finds_the_tuning_section_through_the_kinds_hook(tmp_path: Path) -> None:
    """The simulator names no kind: the `tuning:` section is the XLA kind's hook's, a field
    of the scenario with its errors in place and its model checked; an unknown section is
    still refused (a typo is not a healthy cluster)."""
    from sweepd.sim.hooks import sim_hooks

    assert [h.section for h in sim_hooks()] == ["tuning"]
    sc = load_scenario(scenario(tmp_path))
    assert sc.section("tuning") is sc.tuning and sc.tuning.model == "deepseek3-671b"
    assert sc.section("no-such-section") is None
    base = yaml.safe_load(scenario(tmp_path).read_text())
    for extra, error in [({"tunning": {}}, "tunning: Extra inputs are not permitted"),
                         ({"tuning": {"model": "gpt-9"}}, "unknown model"),
                         ({"tuning": {"per_device_batch_size": 0}},
                          "tuning.per_device_batch_size")]:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({**base, **extra}))
        with pytest.raises(ScenarioError, match=re.escape(error)):
            load_scenario(path)
    # A scenario without the section plans every job with the simulator's own truth.
    plain = {k: v for k, v in base.items() if k != "tuning"}
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(plain))
    assert load_scenario(path).section("tuning") is None
