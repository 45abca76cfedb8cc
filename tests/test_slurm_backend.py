"""The `slurm` backend against the local real Slurm cluster (scripts/slurm-cluster.sh).

`slurm_env` comes from tests/slurm_cluster.py through tests/conftest.py."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    SchedulerState,
    SubmitRefused,
)
from sweepd.clusters.slurm import SlurmCluster, parse_node_states, scontrol_exit, wait_status_exit
from sweepd.core.node_check import UNUSABLE
from tests.slurm_cluster import MAXTEXT_FIXTURE, run_cluster_script, stop_controller
from tests.support.slurm import (
    FAKE_TRAIN,
    FINISHED,
    Settings,
    make_cluster,
    recording_prefix,
    wait_state,
)

pytestmark = pytest.mark.slurm



async def run(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, env={**os.environ, **(env or {})}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()












# -- pure parsing ---------------------------------------------------------------------------

def test_exit_code_decoding() -> None:
    assert wait_status_exit("768") == 3
    assert wait_status_exit("15") == 143
    assert wait_status_exit("0") == 0
    assert scontrol_exit("3:0") == 3
    assert scontrol_exit("0:15") == 143
    # sinfo's node|state lines, each state as sinfo may spell it.
    sinfo = {"chi1": "idle", "chi2": "down*", "chi3": "drained", "chi4": "allocated"}
    assert parse_node_states("".join(f"{node}|{state}\n" for node, state in sinfo.items())) == {
        "chi1": "idle", "chi2": "down", "chi3": "drain", "chi4": "alloc"}


def test_ssh_prefix_quotes_for_the_remote_shell() -> None:
    cluster = SlurmCluster(Settings(command_prefix=["ssh", "login1"],
                                    slurm_conf=Path("/etc/slurm x/slurm.conf")))
    argv, cwd = cluster.commands.argv(["sbatch", "-w", "chi[1,2]", "--comment=a b"], Path("/r"))
    assert cwd is None
    # The remote shell reads back each word as it was given.
    assert argv[:2] == ["ssh", "login1"] and len(argv) == 3
    assert shlex.split(argv[2]) == ["cd", "/r", "&&", "env", "SLURM_CONF=/etc/slurm x/slurm.conf",
                                    "sbatch", "-w", "chi[1,2]", "--comment=a b"]
    assert "'chi[1,2]'" in argv[2]   # quoted: the glob reaches sbatch, not the shell
    local = SlurmCluster(Settings(command_prefix=["sudo"]))
    assert local.commands.argv(["squeue"], Path("/r")) == (["sudo", "squeue"], Path("/r"))


# -- against the cluster --------------------------------------------------------------------

async def test_direct_two_node_job(slurm_env: dict[str, str], tmp_path: Path) -> None:
    cluster = make_cluster(slurm_env)
    sub = await cluster.submit(JobRequest(
        token="direct1", model="llama2-70b", nodes=["chi2863", "chi2832"], output_dir=tmp_path,
        overrides={"steps": "2"}, env={"FOO": "bar baz"}, tag="exp1"))
    assert sub.job_name == "JAX-llama2-70b-exp1-steps_2-_env_FOO_bar baz"
    assert sub.log_path == tmp_path / f"{sub.backend_id}-{sub.job_name}.log"
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status == JobStatus(SchedulerState.COMPLETED, 0, None)
    log = sub.log_path.read_text()
    assert f"JOB_ID={sub.backend_id}\n" in log
    assert "JOB_NODELIST=chi[2832,2863]\n" in log
    assert "0: rank=0 node=chi2832" in log and "1: rank=1 node=chi2863" in log
    assert "0: completed step: 1," in log and "1: completed step: 1," in log
    assert "0: env FOO=bar baz" in log  # request.env is exported in the job
    assert "  Status: SUCCESS (exit 0)" in log


async def test_direct_xla_flags_are_added_to_the_inherited_ones(slurm_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    cluster = make_cluster(slurm_env)
    # The run's env sets XLA_FLAGS (as a model's env file does); the flags are appended,
    # each word as it was given, shell characters included.
    sub = await cluster.submit(JobRequest(
        token="xla1", model="llama2-70b", nodes=["chi2832"], output_dir=tmp_path,
        overrides={"steps": "2"}, env={"XLA_FLAGS": "--base=0"},
        xla_flags=["--xla_a=1", "--xla_b=$(false);'x'"]))
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status == JobStatus(SchedulerState.COMPLETED, 0, None)
    # The job's own XLA_FLAGS, as the trainer's `env` line prints it (rank 0).
    [flags] = [line.removeprefix("0: env XLA_FLAGS=")
               for line in sub.log_path.read_text().splitlines()
               if line.startswith("0: env XLA_FLAGS=")]
    assert flags.split(" ") == ["--base=0", "--xla_a=1", "--xla_b=$(false);'x'"]


async def test_direct_header_and_summary_commands(slurm_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    """The lead plugs the real trainer's `header` / `summary` subcommands in here."""
    cluster = make_cluster(slurm_env, header_command=["echo", "HDR"],
                           summary_command=["echo", "SUM"], train_command=[*FAKE_TRAIN])
    sub = await cluster.submit(JobRequest(token="hs1", model="grok-1", nodes=["chi2870"],
                                          output_dir=tmp_path, env={"FAKE_EXIT": "4"},
                                          commit="abc123"))
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status == JobStatus(SchedulerState.FAILED, 4, "NonZeroExitCode")
    log = sub.log_path.read_text().splitlines()
    job = f"--job-id {sub.backend_id} --job-name {sub.job_name} --model grok-1 --nodes chi2870"
    assert log[0] == f"HDR {job} -- _env_FAKE_EXIT=4"
    assert re.fullmatch(rf"SUM {re.escape(job)} --exit 4 --wall \d+ "
                        r"--failure Training FAILED \(exit=4\)", log[-1])


async def test_submit_sh_mode_and_find_by_token(slurm_env: dict[str, str],
                                                tmp_path: Path) -> None:
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    cluster = make_cluster(slurm_env, mode="submit_sh", repo=repo)
    sub = await cluster.submit(JobRequest(
        token="tok42", model="70b", nodes=["chi2867", "chi2868"], output_dir=tmp_path,
        overrides={"steps": "2"}, env={"XLA_FLAGS": "--xla_foo=1"}, alias="my-run", tag="exp1"))
    # submit.sh resolved `70b` against configs/ and appended the passthrough to the tag.
    name = "JAX-llama2-70b-exp1-steps_2-_env_XLA_FLAGS_--xla_foo_1-_env_SWEEPD_TOKEN_tok42"
    assert sub.job_name == name
    assert sub.log_path == repo / "outputs" / f"{sub.backend_id}-{name}.log"
    found = await cluster.find_by_token("tok42")
    assert found == sub
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status.state is SchedulerState.COMPLETED
    log = sub.log_path.read_text()
    assert "MODEL_NAME=llama2-70b\n" in log
    assert "0: completed step: 1," in log and "1: completed step: 1," in log
    assert "0: env SWEEPD_TOKEN=tok42" in log and "1: env XLA_FLAGS=--xla_foo=1" in log
    assert await cluster.find_by_token("tok4") is None


async def test_submit_sh_refusals(slurm_env: dict[str, str], tmp_path: Path) -> None:
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    cluster = make_cluster(slurm_env, mode="submit_sh", repo=repo)
    with pytest.raises(SubmitRefused, match="Unknown model"):
        await cluster.submit(JobRequest(token="r1", model="nosuch", nodes=["chi2832"],
                                        output_dir=tmp_path))
    with pytest.raises(SubmitRefused, match="resolution failed"):
        await cluster.submit(JobRequest(token="r2", model="grok", nodes=["chi2832"],
                                        output_dir=tmp_path))
    # submit.sh takes XLA_FLAGS from the model's env file: a run's own flags cannot be added.
    with pytest.raises(SubmitRefused, match="use direct mode"):
        await cluster.submit(JobRequest(token="r3", model="70b", nodes=["chi2832"],
                                        output_dir=tmp_path, xla_flags=["--xla_a=1"]))
    # The fixture keeps submit.sh's own spec and name guards.
    rc, out = await run([str(repo / "submit.sh"), "70b:a:b:c"])
    assert rc == 1 and "too many ':' separators" in out
    rc, out = await run([str(repo / "submit.sh"), "70b", "--", "x=" + "y" * 240])
    assert rc == 1 and "would exceed 255B" in out


@pytest.mark.parametrize("mode", ["direct", "submit_sh"])
async def test_job_name_over_243_bytes_refused(slurm_env: dict[str, str], tmp_path: Path,
                                               mode: str) -> None:
    prefix, log = recording_prefix(tmp_path)
    cluster = make_cluster(slurm_env, mode=mode, repo=MAXTEXT_FIXTURE, command_prefix=prefix)
    with pytest.raises(SubmitRefused, match="243"):
        await cluster.submit(JobRequest(token="long", model="llama2-70b", nodes=["chi2832"],
                                        output_dir=tmp_path, env={"K": "v" * 240}))
    assert not log.exists()  # refused before any command ran


async def test_poll_several_jobs_in_one_call(slurm_env: dict[str, str], tmp_path: Path) -> None:
    prefix, log = recording_prefix(tmp_path)
    cluster = make_cluster(slurm_env, command_prefix=prefix)
    ok = await cluster.submit(JobRequest(token="p1", model="m", nodes=["chi2870"],
                                         output_dir=tmp_path))
    bad = await cluster.submit(JobRequest(token="p2", model="m", nodes=["chi2872"],
                                          output_dir=tmp_path, env={"FAKE_EXIT": "3"}))
    ids = [ok.backend_id, bad.backend_id]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 40
    while True:
        before = log.read_text().count("\n")
        states = await cluster.poll([*ids, "999999"])
        lines = log.read_text().splitlines()[before:]
        if all(states[i].state.finished for i in ids):
            break
        assert loop.time() < deadline, states
        await asyncio.sleep(0.3)
    assert len([x for x in lines if x.startswith("squeue")]) == 1
    assert f"-j {ok.backend_id},{bad.backend_id},999999" in lines[0]
    assert states[ok.backend_id] == JobStatus(SchedulerState.COMPLETED, 0, None)
    assert states[bad.backend_id].state is SchedulerState.FAILED
    assert states[bad.backend_id].exit_code == 3
    assert states["999999"] == JobStatus(SchedulerState.GONE)
    assert "FAILED (exit 3)" in bad.log_path.read_text()


async def test_finished_job_seen_via_scontrol(slurm_env: dict[str, str], tmp_path: Path) -> None:
    cluster = make_cluster(slurm_env)
    sub = await cluster.submit(JobRequest(token="sc1", model="m", nodes=["chi2880"],
                                          output_dir=tmp_path, env={"FAKE_EXIT": "2"}))
    await wait_state(cluster, sub.backend_id, FINISHED)
    # As if the job had left squeue's view: only `scontrol show job` still knows it.
    prefix, log = recording_prefix(tmp_path, hide_squeue=True)
    blind = make_cluster(slurm_env, command_prefix=prefix)
    states = await blind.poll([sub.backend_id, "999998"])
    assert states[sub.backend_id] == JobStatus(SchedulerState.FAILED, 2, "NonZeroExitCode")
    assert states["999998"] == JobStatus(SchedulerState.GONE)
    assert f"scontrol show job {sub.backend_id}" in log.read_text()


async def test_cancel(slurm_env: dict[str, str], tmp_path: Path) -> None:
    cluster = make_cluster(slurm_env)
    sub = await cluster.submit(JobRequest(token="c1", model="m", nodes=["chi2881"],
                                          output_dir=tmp_path, overrides={"steps": "600"},
                                          env={"FAKE_STEP_SECONDS": "0.1"}))
    await wait_state(cluster, sub.backend_id, {SchedulerState.RUNNING})
    found = await cluster.find_by_token("c1")  # direct mode: the token is in the comment
    assert found == sub
    for _ in range(100):
        if "completed step" in sub.log_path.read_text():
            break
        await asyncio.sleep(0.2)
    await cluster.cancel(sub.backend_id)
    status = await wait_state(cluster, sub.backend_id, FINISHED)
    assert status.state is SchedulerState.CANCELLED
    await cluster.cancel(sub.backend_id)  # cancelling a finished job is a no-op
    # The log's own verdict is written before Slurm's KillWait SIGKILL.
    for _ in range(50):
        if "CANCELLED (scancel / SIGTERM)" in sub.log_path.read_text():
            break
        await asyncio.sleep(0.1)
    assert "CANCELLED (scancel / SIGTERM)" in sub.log_path.read_text()


async def test_node_states_and_resume(slurm_env: dict[str, str]) -> None:
    nodes = ["chi2832", "chi2881"]
    rc, out = await run(["scontrol", "update", "NodeName=chi2881", "State=DRAIN",
                         "Reason=test"], slurm_env)
    assert rc == 0, out
    try:
        states = await make_cluster(slurm_env).node_states(nodes)
        assert states["chi2881"] in ("drain", "drng")
        assert states["chi2832"] in ("idle", "alloc", "comp")
        with pytest.raises(PermissionError):
            await make_cluster(slurm_env).resume_node("chi2881")
        await make_cluster(slurm_env, allow_resume=True).resume_node("chi2881")
        states = await make_cluster(slurm_env).node_states(["chi2881"])
        assert states["chi2881"] in ("idle", "alloc", "comp")
    finally:
        await run(["scontrol", "update", "NodeName=chi2881", "State=RESUME"], slurm_env)


async def test_a_node_slurm_does_not_list_is_not_in_the_cluster(
        slurm_env: dict[str, str]) -> None:
    """Slurm's own `unknown` (a node not yet registered after a controller restart) must not
    read as "not a node of this cluster": submits right after a restart were refused."""
    cluster = make_cluster(slurm_env, time_limit=None)
    states = await cluster.node_states(["chi2832", "chi9999"])
    assert states == {"chi2832": "idle", "chi9999": NOT_IN_CLUSTER}
    assert NOT_IN_CLUSTER in UNUSABLE and "unknown" not in UNUSABLE


async def test_controller_stopped(slurm_env: dict[str, str]) -> None:
    """Stop slurmctld alone: poll says ControllerUnreachable; the cluster is restored."""
    cluster = make_cluster(slurm_env, time_limit=None)
    await stop_controller()
    try:
        with pytest.raises(ControllerUnreachable):
            await cluster.poll(["1"])
        with pytest.raises(ControllerUnreachable):
            await cluster.node_states(["chi2832"])
    finally:
        start = run_cluster_script("start")
        check = run_cluster_script("check")
    assert start.returncode == 0 and check.returncode == 0, start.stderr + check.stderr
    # The check's own job may leave the node completing for a moment: restored means idle
    # again soon after, not at the first look.
    deadline = time.monotonic() + 30
    while (state := (await cluster.node_states(["chi2832"]))["chi2832"]) != "idle":
        assert state == "comp" and time.monotonic() < deadline, state
        await asyncio.sleep(0.5)
