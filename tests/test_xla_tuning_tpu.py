"""An xla-tuning sweep on TPU (`platform: tpu`): its profiles' flags reach the job in
LIBTPU_INIT_ARGS, where libtpu reads them, XLA_FLAGS untouched, end to end on the simulated
cluster; a flag the TPU catalog does not know is refused in one line before anything runs;
the slurm direct-mode script exports the flags in the request's variable; a GPU spec is as
before; the spec's `max_runs` caps the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.cli.main import main
from sweepd.clusters.slurm.script import BatchScript, render_batch_script
from sweepd.core.submit import job_request
from sweepd.kinds.parse import load_spec_file
from sweepd.kinds.xla_tuning.catalog.tpu_flags import KNOWN, VMEM_LIMIT
from sweepd.kinds.xla_tuning.deploy.job_overrides import job_overrides
from sweepd.kinds.xla_tuning.evidence import logread
from sweepd.kinds.xla_tuning.sim.tuning import TPU_SCENARIO
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import RunParams
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, run, sim_config
from tests.support.xla import tpu_spec

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples/xla-tuning/tpu.yaml"




async def test_a_tpu_sweep_sends_its_flags_in_libtpu_init_args(tmp_path: Path) -> None:
    config = sim_config(tmp_path, TPU_SCENARIO)
    code, lines = await run(config, tpu_spec(max_runs=8))
    assert code == EXIT_VERDICT, lines[-5:]
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = {r.id: r for r in await store.runs.of_sweep(sweep.id)}
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    vmem = [j for j in jobs if runs[j.run_id].params.profile == "vmem96k"]
    assert vmem and all(j.log_path for j in vmem)
    printed = Path(vmem[0].log_path or "").read_text().splitlines()
    env = dict(kv for line in printed if (kv := logread.assignment(line)) is not None)
    assert f"--{VMEM_LIMIT}=98304" in env["LIBTPU_INIT_ARGS"].split()
    assert VMEM_LIMIT not in env["XLA_FLAGS"]          # XLA_FLAGS as the image has it
    # The gather reads them there: the profile counts as applied and measured.
    assert vmem[0].tgs is not None
    base = [j for j in jobs if runs[j.run_id].params.profile == "baseline"]
    base_env = dict(kv for line in Path(base[0].log_path or "").read_text().splitlines()
                    if (kv := logread.assignment(line)) is not None)
    assert "LIBTPU_INIT_ARGS" not in base_env
    assert (sweep.verdict or {}).get("rule") == "stop.catalog_exhausted"


async def test_max_runs_caps_the_sweep_and_its_verdict_says_so(tmp_path: Path) -> None:
    config = sim_config(tmp_path, TPU_SCENARIO)
    code, lines = await run(config, tpu_spec(catalog="extend", profiles=[], max_runs=6))
    assert code == EXIT_VERDICT, lines[-5:]
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    verdict = sweep.verdict or {}
    assert len(jobs) == 6
    assert verdict["rule"] == "stop.max_runs"
    assert "max_runs (6) reached" in verdict["reason"]


def test_an_unknown_tpu_flag_is_refused_in_one_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tpu_spec(profiles=[{"name": "gpuish",
                              "settings": {"xla_gpu_enable_latency_hiding_scheduler": "true"}}])
    path = tmp_path / "bad.yaml"
    import yaml
    path.write_text(yaml.safe_dump(bad))
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-personal-config"))
    code = main(["validate", str(path), "--scenario", str(TPU_SCENARIO)])
    out, err = capsys.readouterr()
    said = (out + err).strip()
    assert code == 2
    assert len(said.splitlines()) == 1, said
    check_golden(GOLDEN / "xla_tuning_messages" / "tpu_gpu_flag_refused.txt",
                 scrubbed(said + "\n", tmp=tmp_path))


def test_the_tpu_catalog_names_only_flags_public_tpu_scripts_pass() -> None:
    spec = XlaTuningSpec.model_validate(tpu_spec(catalog="extend", profiles=[]))
    inputs = spec.inputs()
    keys = {s.key for p in inputs.catalog for s in p.settings}
    assert keys and keys <= KNOWN and VMEM_LIMIT in keys
    assert not any(k.startswith("xla_gpu") for k in keys)
    assert spec.flags_var == "LIBTPU_INIT_ARGS"


def test_the_job_request_and_batch_script_use_the_spec_variable(tmp_path: Path) -> None:
    params = RunParams(xla_flags=[f"--{VMEM_LIMIT}=98304"], profile="vmem96k")
    tpu = XlaTuningSpec.model_validate(tpu_spec())
    req = job_request(tpu, params, token="t", nodes=["tpu1"], output_dir=tmp_path)
    assert req.flags_var == "LIBTPU_INIT_ARGS"
    script = render_batch_script(BatchScript(
        job_name="j", model="m", passthrough=[], env={}, train_command=["true"],
        xla_flags=req.xla_flags, flags_var=req.flags_var))
    assert "XLA_FLAGS" not in script
    # A GPU spec is as before: XLA_FLAGS.
    gpu = XlaTuningSpec.model_validate({**tpu_spec(), "platform": "gpu", "profiles": [],
                                        "catalog": "extend"})
    greq = job_request(gpu, RunParams(xla_flags=["--xla_gpu_x=1"]), token="t",
                       nodes=["tpu1"], output_dir=tmp_path)
    assert greq.flags_var == "XLA_FLAGS"
    gscript = render_batch_script(BatchScript(
        job_name="j", model="m", passthrough=[], env={}, train_command=["true"],
        xla_flags=greq.xla_flags, flags_var=greq.flags_var))
    assert "LIBTPU_INIT_ARGS" not in gscript
    # The batch scripts' lines that pass the profile's flags.
    check_golden_cases(GOLDEN / "xla_tpu" / "batch_script_flags_lines.txt", {
        "tpu": "\n".join(ln for ln in script.splitlines() if "LIBTPU_INIT_ARGS" in ln),
        "gpu": "\n".join(ln for ln in gscript.splitlines() if "XLA_FLAGS" in ln)})


def test_a_log_without_libtpu_init_args_reads_as_before() -> None:
    lines = ["XLA_FLAGS=--xla_gpu_a=1", "NCCL_X=2"]
    eff = logread.effective(lines)
    assert eff.xla_text == "--xla_gpu_a=1" and eff.xla == {"xla_gpu_a": "1"}
    tpu = logread.effective([*lines, f"LIBTPU_INIT_ARGS=--{VMEM_LIMIT}=65536"])
    assert tpu.xla == {"xla_gpu_a": "1", VMEM_LIMIT: "65536"}


def test_the_tpu_example_is_a_tpu_spec() -> None:
    spec = load_spec_file(EXAMPLE)
    assert isinstance(spec, XlaTuningSpec)
    assert spec.platform == "tpu" and spec.max_runs is not None and spec.max_runs <= 16
    assert all(s.startswith("xla_tpu_scoped_vmem") for p in spec.profiles for s in p.settings)


def test_tpu_jobs_leave_out_the_heartbeat_key_upstream_maxtext_refuses() -> None:
    # Upstream MaxText refused `jax_distributed_heartbeat_timeout_seconds` at start on the
    # chip; the GPU toolkit's template carries it.
    tpu = load_spec_file(EXAMPLE)
    assert isinstance(tpu, XlaTuningSpec)
    gpu = XlaTuningSpec.model_validate({**tpu.model_dump(exclude_unset=True), "platform": "gpu",
                                         "profiles": [], "catalog": "extend"})
    key = "jax_distributed_heartbeat_timeout_seconds"
    assert key not in job_overrides(tpu, "default")
    assert job_overrides(gpu, "default")[key] == 99999
    assert job_overrides(tpu, "default")["steps"] == 15


# ---- a user's words and costs up front -------------------------------------------------


def test_validate_states_the_most_node_hours_from_the_specs_caps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-personal-config"))
    assert main(["validate", str(EXAMPLE), "--scenario", str(TPU_SCENARIO)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("at most:"))
    # 6 runs; 1 node x (2 h timebox + a last wave of 9 jobs at 50 min) = 9.5 node-hours
    # < 6 x 3 x 50 min.
    check_golden(GOLDEN / "xla_tuning_messages" / "tpu_validate_at_most.txt", line + "\n")


def test_a_verdict_headline_says_what_to_deploy_with_one_figure_and_its_interval() -> None:
    from sweepd.kinds.xla_tuning.verdict.plain_words import explained, headline

    said = headline("proposal", "ag768M", 0.1103, (0.081, 0.139), 2,
                    "--xla_gpu_all_gather_combine_threshold_bytes=805306368", "XLA_FLAGS")
    assert said.count("%") == 4   # one gain, its interval: no other figure up front
    tpu = headline("proposal", "vmem32k", 0.02, (0.01, 0.03), 2, "--x=1", "LIBTPU_INIT_ARGS")
    assert tpu.endswith("(in LIBTPU_INIT_ARGS)")
    assert headline("bounded", None, None, None, 0, "", "XLA_FLAGS") == \
        "bounded: no change to deploy"
    text = explained("restore_default lost; family_gaps ran; the cell's arms; restore_default")
    # Each term explained at its first use only.
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "headline_and_plain_words.txt",
                       {"the headline": said, "the terms explained": text})


def test_apply_writes_a_tpu_recipe_as_libtpu_init_args_and_sourcing_proves_it(
        tmp_path: Path) -> None:
    from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
    from sweepd.kinds.xla_tuning.deploy import sourced
    from sweepd.kinds.xla_tuning.deploy.deploy import shell_line

    vmem = Setting(VMEM_LIMIT, "98304", Layer.XLA)
    line = shell_line(vmem)
    check_golden(GOLDEN / "xla_tpu" / "apply_line.txt", line + "\n")
    env_file = tmp_path / "m.env.sh"
    env_file.write_text(line + "\n")
    got = sourced.source(env_file)
    assert got.xla_flags == ""                      # XLA_FLAGS untouched
    assert vmem in got.settings()                   # in effect, read from LIBTPU_INIT_ARGS
    assert shell_line(Setting("xla_gpu_a", "1", Layer.XLA)).startswith("export XLA_FLAGS=")
