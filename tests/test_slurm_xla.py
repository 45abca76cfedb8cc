"""How a flag profile reaches its job on the local real Slurm cluster (issue 14, "How a
profile reaches the job"), through the cluster backend alone.

submit.sh mode: the profile's arms go into the toolkit's `train_env.sh` before submission
and the job is submitted with `_env_TUNE_PROFILE=<name>`; the job (run through the fake
toolkit's `_train.sh`, which layers train_env.sh, the per-model env file and the
passthrough as the real one does) prints its environment, and the effective values are
read back from its log. Direct mode: the flags are appended to the inherited XLA_FLAGS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sweepd.clusters import train_env as te
from sweepd.clusters.base import JobProfile, JobRequest, SchedulerState, SubmitRefused
from sweepd.clusters.slurm import TRAIN_ENV_MARK, SlurmCluster
from sweepd.core.submit import job_profile
from sweepd.kinds.xla_tuning.evidence.logread import Effective, effective, parse_flags
from sweepd.monitor.facts import StepFact
from sweepd.monitor.parse import parse_line
from sweepd.store.rows import RunParams
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.slurm_cluster import MAXTEXT_FIXTURE
from tests.support.slurm import FINISHED, Settings, fresh, token_jobs, toolkit, wait_state

pytestmark = pytest.mark.slurm

# The job names, the lines written to the terminal and the refusals, one golden file a test.
GOLDEN_DIR = GOLDEN / "xla_slurm"

AG = "xla_gpu_all_gather_combine_threshold_bytes"
PAG = "--xla_gpu_enable_pipelined_all_gather=true"
DBUF = "--xla_gpu_enable_while_loop_double_buffering=true"
# The image's own flags, inherited by every job (sbatch exports the submitter's environment).
IMAGE = f"--xla_gpu_enable_latency_hiding_scheduler=true --{AG}=8589934592"
# What the fixture's train_env.sh appends to the inherited XLA_FLAGS on its own.
TOOLKIT = ("--xla_gpu_unsupported_use_ragged_all_to_all_one_shot_kernel=false "
           "--xla_gpu_enable_command_buffer=''")


def submit_sh(slurm_env: dict[str, str], repo: Path) -> SlurmCluster:
    """submit.sh mode whose payload runs through `_train.sh` (it prints the environment)."""
    (repo / "train_cmd").write_text(f"bash {repo}/_train.sh {sys.executable} "
                                    f"{repo}/fake_train.py")
    settings = Settings(mode="submit_sh", repo=repo, slurm_conf=Path(slurm_env["SLURM_CONF"]))
    return SlurmCluster(settings, env={"XLA_FLAGS": IMAGE})


def profile_request(token: str, node: str, out: Path, profile: str, flags: list[str],
                    profile_env: dict[str, str], model: str = "llama2-70b",
                    run_env: dict[str, str] | None = None) -> JobRequest:
    return JobRequest(token=token, model=model, nodes=[node], output_dir=out,
                      overrides={"steps": "2"}, env={**(run_env or {}), **profile_env},
                      xla_flags=flags, profile=JobProfile(profile, profile_env))


async def job_effective(cluster: SlurmCluster, job_id: str, log: Path) -> Effective:
    status = await wait_state(cluster, job_id, FINISHED)
    assert status.state is SchedulerState.COMPLETED, log.read_text()
    lines = log.read_text().splitlines()
    assert StepFact(rank=0, step=1, tgs=2000.0, seconds=0.05, tflops=300.0, loss=9.4) in [
        parse_line(ln) for ln in lines]
    return effective(lines, keys=("FAKE_RUN_WIDE",))


def test_a_profiles_own_env_is_the_runs_beyond_the_specs() -> None:
    spec_env = {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL"}
    params = RunParams(profile="p", env={"NCCL_DEBUG": "INFO", "NCCL_PROTO": "Simple",
                                         "NCCL_BUFFSIZE": "16777216"})
    assert job_profile(spec_env, params) == JobProfile(
        "p", {"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "16777216"})
    assert job_profile(spec_env, RunParams(env={"NCCL_PROTO": "Simple"})) is None


async def test_submit_sh_writes_the_arm_and_the_job_runs_it(slurm_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    original = (repo / "train_env.sh").read_text()
    cluster = submit_sh(slurm_env, repo)
    token = fresh("xprof")
    env = {"NCCL_NCHANNELS_PER_NET_PEER": "8", "NCCL_PROTO": "Simple"}
    sub = await cluster.submit(profile_request(token, "chi2880", tmp_path, "pag+nch8",
                                               [PAG, DBUF], env,
                                               run_env={"FAKE_RUN_WIDE": "1"}))
    # The profile rides as its selector alone; its flags and env vars are in the file.
    said = {"job name": scrubbed(sub.job_name, token=token),
            "prepared": scrubbed(sub.prepared or "", repo=repo)}
    text = (repo / "train_env.sh").read_text()
    assert te.arms(text) == (te.Arm("pag+nch8", (PAG, DBUF), tuple(env.items())),)
    assert te.remove_arms(text) == original   # the rest of the file, line for line

    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    assert eff.xla_text == f"{IMAGE} {TOOLKIT} {PAG} {DBUF}"   # appended, last
    assert eff.env["NCCL_NCHANNELS_PER_NET_PEER"] == "8"      # over train_env.sh's 4
    assert eff.env["NCCL_PROTO"] == "Simple"
    assert eff.env["FAKE_RUN_WIDE"] == "1"                    # the run's own passthrough

    # The same arm again (a re-run, a resume): nothing written, the job runs it.
    again = await cluster.submit(profile_request(fresh("xprof2"), "chi2881", tmp_path,
                                                 "pag+nch8", [PAG, DBUF], env))
    said["prepared again"] = scrubbed(again.prepared or "", repo=repo)
    assert (repo / "train_env.sh").read_text() == text
    # Another profile is added beside it; the first arm stays as it was.
    third = await cluster.submit(profile_request(fresh("xprof3"), "chi2867", tmp_path,
                                                 "dbuf", [DBUF], {}))
    assert [a.name for a in te.arms((repo / "train_env.sh").read_text())] == ["pag+nch8", "dbuf"]
    eff = await job_effective(cluster, third.backend_id, third.log_path)
    assert eff.xla_text == f"{IMAGE} {TOOLKIT} {DBUF}"
    assert eff.env["NCCL_NCHANNELS_PER_NET_PEER"] == "4"
    await wait_state(cluster, again.backend_id, FINISHED)

    # A conflicting arm of the same name: refused, nothing written, nothing submitted.
    before = (repo / "train_env.sh").read_text()
    bad = fresh("xconf")
    with pytest.raises(SubmitRefused, match="already has an arm 'pag\\+nch8' with other "
                                            "content"):
        await cluster.submit(profile_request(bad, "chi2868", tmp_path, "pag+nch8", [PAG], {}))
    assert (repo / "train_env.sh").read_text() == before
    assert await token_jobs(slurm_env, bad) == {}

    # The sweep's end message: what is left in the file and how to remove it.
    note = await cluster.end_note(tmp_path)
    assert note is not None
    said["end note"] = scrubbed(note, repo=repo, python=sys.executable)
    clean = note.splitlines()[-1].split(": ", 1)[1]
    assert clean.split() == [sys.executable, "-m", "sweepd.clusters.train_env", "clean",
                             str(repo / "train_env.sh")]
    # Each arm noted by name, for its removal at the sweep's end.
    assert (tmp_path / TRAIN_ENV_MARK).read_text() == "".join(
        f"{repo / 'train_env.sh'}\t{name}\n" for name in ("pag+nch8", "dbuf"))
    subprocess.run(clean.split(), check=True, capture_output=True,
                   env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert (repo / "train_env.sh").read_text() == original
    said["end note after the clean"] = scrubbed(await cluster.end_note(tmp_path) or "",
                                                repo=repo)
    check_golden_cases(GOLDEN_DIR / "submit_sh_arm.txt", said)


async def test_the_per_model_env_file_decides_where_a_setting_goes(slurm_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    """configs/deepseek3-671b.env.sh sets the memory fraction and the all-gather threshold
    after train_env.sh: the fraction is passed as `_env_` too (re-exported after the file,
    it wins); a profile of the threshold can never win there and is refused unwritten."""
    repo = toolkit(tmp_path)
    original = (repo / "train_env.sh").read_text()
    cluster = submit_sh(slurm_env, repo)
    mem = {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"}
    mem_token = fresh("xmem")
    sub = await cluster.submit(profile_request(mem_token, "chi2872", tmp_path, "mem95",
                                               [PAG], mem, model="deepseek3-671b"))
    said = {"job name": scrubbed(sub.job_name, token=mem_token)}
    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    assert eff.env.items() >= mem.items()
    assert eff.xla_text == f"{IMAGE} {TOOLKIT} {PAG} --{AG}=1073741824"
    assert eff.xla.items() >= parse_flags(PAG).items()

    after = (repo / "train_env.sh").read_text()
    token = fresh("xlost")
    with pytest.raises(SubmitRefused) as lost:
        await cluster.submit(profile_request(token, "chi2872", tmp_path, "ag512M",
                                             [f"--{AG}=536870912"], {}, model="deepseek3-671b"))
    said["refused: the env file sets it after train_env.sh"] = scrubbed(str(lost.value),
                                                                        repo=repo)
    check_golden_cases(GOLDEN_DIR / "per_model_env_file.txt", said)
    assert (repo / "train_env.sh").read_text() == after != original
    assert await token_jobs(slurm_env, token) == {}
    # The same flag for a model whose env file does not set it is fine.
    ok = await cluster.submit(profile_request(fresh("xag"), "chi2872", tmp_path, "ag512M",
                                              [f"--{AG}=536870912"], {}))
    eff = await job_effective(cluster, ok.backend_id, ok.log_path)
    assert eff.xla[AG] == "536870912"


async def test_submit_sh_refusals_write_nothing(slurm_env: dict[str, str],
                                               tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    original = (repo / "train_env.sh").read_text()
    cluster = submit_sh(slurm_env, repo)
    long_name = "p" + "x" * 99
    # Env settings ride in the name (MaxText overrides would be carried outside it).
    many = {f"K{i}": "v" * 8 for i in range(12)}
    with pytest.raises(SubmitRefused, match=f"shorten the profile's name \\({long_name}\\)"):
        await cluster.submit(JobRequest(
            token=fresh("xlong"), model="llama2-70b", nodes=["chi2832"], output_dir=tmp_path,
            env=many, xla_flags=[PAG], profile=JobProfile(long_name)))
    with pytest.raises(SubmitRefused, match="is not usable as a TUNE_PROFILE"):
        await cluster.submit(profile_request(fresh("xname"), "chi2832", tmp_path, "a b",
                                             [PAG], {}))
    with pytest.raises(SubmitRefused, match=r"XLA flag .* is refused"):
        await cluster.submit(profile_request(fresh("xflag"), "chi2832", tmp_path, "q",
                                             ["--xla_a=$(reboot)"], {}))
    with pytest.raises(SubmitRefused, match="under no profile name"):
        await cluster.submit(JobRequest(token=fresh("xnone"), model="llama2-70b",
                                        nodes=["chi2832"], output_dir=tmp_path,
                                        xla_flags=[PAG]))
    assert (repo / "train_env.sh").read_text() == original
    assert not (tmp_path / TRAIN_ENV_MARK).exists()
    assert await cluster.end_note(tmp_path) is None


async def test_direct_mode_appends_the_profile_to_the_inherited_flags(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """Direct mode: no train_env.sh; the flags are appended to the XLA_FLAGS the job
    inherits and the env vars exported in the job."""
    wrapper = tmp_path / "show-env.sh"
    wrapper.write_text("#!/bin/bash\nprintenv | sort\n"
                       f'exec {sys.executable} {MAXTEXT_FIXTURE / "fake_train.py"} "$@"\n')
    wrapper.chmod(0o755)
    settings = Settings(slurm_conf=Path(slurm_env["SLURM_CONF"]), train_command=[str(wrapper)])
    cluster = SlurmCluster(settings, env={"XLA_FLAGS": IMAGE})
    env = {"NCCL_NCHANNELS_PER_NET_PEER": "8"}
    sub = await cluster.submit(profile_request("xdirect-" + fresh("d"), "chi2863", tmp_path,
                                               "pag+nch8", [PAG, DBUF], env))
    assert sub.prepared is None
    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    assert eff.xla_text == f"{IMAGE} {PAG} {DBUF}"
    assert eff.env["NCCL_NCHANNELS_PER_NET_PEER"] == "8"
    assert await cluster.end_note(tmp_path) is None



def test_env_vars_train_env_sh_reads_itself_are_found() -> None:
    text = (MAXTEXT_FIXTURE / "train_env.sh").read_text()
    a = te.arm("evidence", env={"ENABLE_XLA_DUMP": "1", "NCCL_PROTO": "Simple",
                                "NCCL_IB_GID_INDEX": "3", "NCCL_NCHANNELS_PER_NET_PEER": "8"})
    # Exported by the file (not read) or not named in it: the post-NCCL arm is enough.
    assert te.read_early(text, a) == ("ENABLE_XLA_DUMP", "NCCL_IB_GID_INDEX")
    # sweepd's own blocks read TUNE_PROFILE only; they are not the file's.
    assert te.read_early(te.add_arm(text, te.arm("x", env={"NCCL_PROTO": "LL"})), a) == \
        ("ENABLE_XLA_DUMP", "NCCL_IB_GID_INDEX")


async def test_the_evidence_runs_dump_switch_reaches_train_env_sh(slurm_env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    """train_env.sh decides on ENABLE_XLA_DUMP near its top, before the post-NCCL arm
    exports it: the switch is passed as `_env_` as well, so the dump is on."""
    repo = toolkit(tmp_path)
    cluster = submit_sh(slurm_env, repo)
    token = fresh("xdump")
    sub = await cluster.submit(profile_request(token, "chi2881", tmp_path, "evidence",
                                               [], {"ENABLE_XLA_DUMP": "1"}))
    said = {"job name": scrubbed(sub.job_name, token=token)}
    assert te.arms((repo / "train_env.sh").read_text()) == (
        te.Arm("evidence", (), (("ENABLE_XLA_DUMP", "1"),)),)
    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    # train_env.sh's own lines on the dump: it was switched on (before the post-NCCL arm).
    said["the job's [XLA dump] lines"] = scrubbed("\n".join(
        ln for ln in sub.log_path.read_text().splitlines() if "[XLA dump]" in ln),
        out=tmp_path, repo=repo)
    check_golden_cases(GOLDEN_DIR / "evidence_dump_switch.txt", said)
    assert "xla_dump_to" in eff.xla


async def test_the_baseline_profile_writes_nothing(slurm_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    """`baseline` is the block's built-in no-op arm: passed by name, nothing written, nothing
    to report at the end."""
    repo = toolkit(tmp_path)
    original = (repo / "train_env.sh").read_text()
    cluster = submit_sh(slurm_env, repo)
    sub = await cluster.submit(profile_request(fresh("xbase"), "chi2870", tmp_path, "baseline",
                                               [], {}))
    assert "-_env_TUNE_PROFILE_baseline-" in sub.job_name
    assert (repo / "train_env.sh").read_text() == original
    assert await cluster.end_note(tmp_path) is None
    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    assert eff.xla_text == f"{IMAGE} {TOOLKIT}"


async def test_a_name_that_fits_only_without_the_token_keeps_it_in_the_comment(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """sweepd's token rides in the job name when it fits; it is always in --comment, which
    recovery reads first: a name that fits only without it is submitted without it."""
    repo = toolkit(tmp_path)
    cluster = submit_sh(slurm_env, repo)
    token = fresh("xtok")
    # 228 bytes of name without the token part: fits; with it, over 243.
    overrides = {"steps": "2", "pad": "y" * 187}
    sub = await cluster.submit(JobRequest(
        token=token, model="llama2-70b", nodes=["chi2880"], output_dir=tmp_path,
        overrides=overrides, xla_flags=[PAG], profile=JobProfile("pag")))
    assert len(sub.job_name) <= 243 and token not in sub.job_name
    check_golden_cases(GOLDEN_DIR / "token_in_the_comment_only.txt", {
        "job name": sub.job_name, "prepared": scrubbed(sub.prepared or "", repo=repo)})
    assert await cluster.find_by_token(token) == replace(sub, prepared=None)
    assert token in (await cluster.live_tokens()).values() or \
        (await cluster.poll([sub.backend_id]))[sub.backend_id].state.finished
    eff = await job_effective(cluster, sub.backend_id, sub.log_path)
    assert eff.xla_text == f"{IMAGE} {TOOLKIT} {PAG}"


async def test_a_job_on_a_node_that_went_down_ends_and_is_not_requeued(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """Slurm would requeue a batch job whose node failed, to wait (pinned with -w) for that
    node; sweepd submits with --no-requeue and decides any retry itself."""
    settings = Settings(slurm_conf=Path(slurm_env["SLURM_CONF"]))
    cluster = SlurmCluster(settings)
    sub = await cluster.submit(JobRequest(
        token="xdown-" + fresh("d"), model="llama2-70b", nodes=["chi2868"],
        output_dir=tmp_path, overrides={"steps": "60"}, env={"FAKE_STEP_SECONDS": "1"}))
    await wait_state(cluster, sub.backend_id, {SchedulerState.RUNNING})
    env = {**os.environ, **slurm_env}
    try:
        subprocess.run(["scontrol", "update", "NodeName=chi2868", "State=DOWN",
                        "Reason=sweepd-test"], env=env, check=True, timeout=30)
        status = await wait_state(cluster, sub.backend_id, FINISHED)
    finally:
        subprocess.run(["scontrol", "update", "NodeName=chi2868", "State=RESUME"], env=env,
                       check=False, timeout=30, capture_output=True)
        subprocess.run(["scancel", sub.backend_id], env=env, check=False, timeout=30)
    assert status.state is not SchedulerState.COMPLETED
    shown = subprocess.run(["scontrol", "show", "job", sub.backend_id], env=env, text=True,
                           capture_output=True, check=True, timeout=30).stdout
    assert "Requeue=0 Restarts=0" in shown
