"""Overrides that do not fit submit.sh's 243-byte job name, on the local Slurm cluster
(issue 21 item 6): carried in a per-job copy of the model's config that the toolkit
accepts, never dropped; what cannot be carried is refused before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from sweepd.clusters.base import JobRequest, SchedulerState, SpecRefused
from sweepd.clusters.slurm import SlurmCluster
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.support.job_log import after, printed_env
from tests.support.slurm import (
    FINISHED,
    Settings,
    fresh,
    make_cluster,
    recording_prefix,
    toolkit,
    wait_state,
)

pytestmark = pytest.mark.slurm

# The seed's MoE sparse template: with the token, about 260 bytes of job name.
SPARSE = {"steps": "2", "dataset_type": "synthetic", "dcn_fsdp_parallelism": "8",
          "sparse_matmul": "true", "use_turbo_grouped_gemm": "true",
          "use_deepep_dispatch": "true", "per_device_batch_size": "7",
          "jax_distributed_heartbeat_timeout_seconds": "99999",
          "skip_first_n_steps_for_profiler": "10", "profiler_steps": "3"}


async def test_submit_sh_carries_what_does_not_fit_in_a_per_job_config(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    # The payload runs through the stand-in _train.sh, which sources configs/<name>.env.sh.
    (repo / "train_cmd").write_text(f"bash {repo}/_train.sh {sys.executable} "
                                    f"{repo}/fake_train.py")
    # The stand-in's configs are empty; a real one holds the run config.
    (repo / "configs" / "deepseek3-671b.gpu.yml").write_text(
        "base_config: base.yml\nmodel_name: deepseek3-671b\nsteps: 15\n"
        "per_device_batch_size: 4\nsparse_matmul: false\n")
    before = sorted(p.name for p in (repo / "configs").iterdir())
    cluster = SlurmCluster(Settings(mode="submit_sh", repo=repo,
                                    slurm_conf=Path(slurm_env["SLURM_CONF"])))
    out = tmp_path / "sweep-1"
    token = fresh("carry")
    sub = await cluster.submit(JobRequest(token=token, model="deepseek3-671b", nodes=["chi2870"],
                                          output_dir=out, overrides=SPARSE))
    assert len(sub.job_name.encode()) <= 243
    # The checkout is as it was: the per-job files went once submit.sh froze its copy.
    assert sorted(p.name for p in (repo / "configs").iterdir()) == before
    copies = list(out.glob("deepseek3-671b-o*.gpu.yml"))
    assert len(copies) == 1
    shim = copies[0].name.removesuffix(".gpu.yml")
    # What the engine records as the submission's change outside sweepd: the per-job config.
    assert sub.prepared is not None
    check_golden(GOLDEN / "slurm_carry" / "prepared.txt",
                 scrubbed(f"{sub.prepared}\n", tmp=tmp_path, shim=shim, token=token))
    assert sub.job_name.startswith(f"JAX-{shim}-")
    carried = yaml.safe_load(copies[0].read_text())
    original = yaml.safe_load((repo / "configs" / "deepseek3-671b.gpu.yml").read_text())
    # Every override is either in the name or in the config: none dropped.
    for key, value in SPARSE.items():
        part = f"{key}_{value}"
        assert part in sub.job_name or carried[key] == yaml.safe_load(value), key
    # The rest is the model's own config.
    assert {k: v for k, v in carried.items() if k not in SPARSE} == \
        {"base_config": "base.yml", "model_name": "deepseek3-671b"}
    assert original["sparse_matmul"] is False
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status.state is SchedulerState.COMPLETED
    log = sub.log_path.read_text()
    # The job ran the frozen copy of the per-job config, with the model's own env file.
    assert f"MODEL_NAME={shim}\n" in log
    assert after(log, "0: Loading per-model env: ") == [f"configs/{shim}.env.sh"]
    assert printed_env(log)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == ".97"   # deepseek3-671b.env.sh
    frozen = [p for p in (repo / "outputs" / ".artifacts").glob(f"*/configs/{shim}.gpu.yml")]
    assert len(frozen) == 1 and frozen[0].read_text() == copies[0].read_text()


@pytest.mark.parametrize("mode", ["direct", "submit_sh"])
async def test_env_that_cannot_fit_is_refused_before_anything_runs(
        slurm_env: dict[str, str], tmp_path: Path, mode: str) -> None:
    prefix, log = recording_prefix(tmp_path)
    repo = toolkit(tmp_path)
    cluster = make_cluster(slurm_env, mode=mode, repo=repo, command_prefix=prefix)
    with pytest.raises(SpecRefused, match="what cannot be carried: _env_K"):
        await cluster.submit(JobRequest(token="long", model="llama2-70b", nodes=["chi2832"],
                                        output_dir=tmp_path, env={"K": "v" * 240}))
    assert not log.exists()  # refused before any command ran
    assert sorted(p.name for p in (repo / "configs").glob("*-o*")) == []


async def test_direct_mode_passes_every_override_and_only_shortens_the_name(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    cluster = make_cluster(slurm_env)
    sub = await cluster.submit(JobRequest(token=fresh("dlong"), model="llama2-70b",
                                          nodes=["chi2832"], output_dir=tmp_path,
                                          overrides={"steps": "2", "k": "v" * 240}))
    assert len(sub.job_name.encode()) <= 243 and "k_vvv" not in sub.job_name
    # Nothing outside sweepd's directories was written: the note is the name's alone.
    assert sub.prepared is None
    assert sub.name_note is not None and "job name without k=" in sub.name_note
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status.state is SchedulerState.COMPLETED
    script = next(tmp_path.glob(".sweepd-*.sbatch")).read_text()
    assert f"k={'v' * 240}" in script    # the train command still gets it
