"""submit.sh mode against the toolkit as it really is (maxtext-slurm-facts.md §1), on the
local real Slurm cluster: the job id read as submit.sh reads it, unclear outcomes settled
by the queue, logs wherever JOB_WORKSPACE points, refusals that name the failing line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sweepd.clusters.base import JobRequest, SchedulerState, SubmitRefused
from sweepd.clusters.slurm import SlurmCluster, failing_line_first, submit_sh_job_id
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.slurm_cluster import MAXTEXT_FIXTURE
from tests.support.slurm import (
    FINISHED,
    Settings,
    fresh,
    sbatch_shim,
    token_jobs,
    toolkit,
    wait_state,
)

pytestmark = pytest.mark.slurm

NAME = "JAX-llama2-70b-steps_2-_env_SWEEPD_TOKEN_{token}"
GOLDEN_HERE = GOLDEN / "slurm_submit_sh"
# submit.sh names each artifact by its time and a random suffix, and gives its size as du
# reads it on this filesystem.
_ARTIFACT = re.compile(r"artifact_\d{8}_\d{6}_[0-9a-f]{4}")
_SIZE = re.compile(r"(Done in \d+s) \(\S+\)")
# Said or not by the filesystem the temporary directory is on, not by the test.
_LOCAL_FS = "WARNING: JOB_WORKSPACE ("


def _said(text: str, **names: object) -> str:
    """What submit.sh or sweepd said, the same on each run: temporary paths, tokens, job
    ids, artifact names and sizes put as <name>, the local-filesystem warning left out."""
    kept = "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith(_LOCAL_FS))
    return _SIZE.sub(r"\1 (<size>)", _ARTIFACT.sub("artifact_<stamp>", scrubbed(kept, **names)))




def cluster(slurm_env: dict[str, str], repo: Path, env: dict[str, str] | None = None,
            timeout_s: float = 60, prefix: tuple[str, ...] = ()) -> SlurmCluster:
    settings = Settings(mode="submit_sh", repo=repo, command_prefix=prefix,
                        slurm_conf=Path(slurm_env["SLURM_CONF"]))
    return SlurmCluster(settings, env=env, timeout_s=timeout_s)






def request(token: str, node: str, tmp_path: Path, **kw: object) -> JobRequest:
    return JobRequest(token=token, model="llama2-70b", nodes=[node], output_dir=tmp_path,
                      overrides={"steps": "2"}, **kw)  # type: ignore[arg-type]




# -- pure -------------------------------------------------------------------------------------

def test_job_id_is_read_from_the_submitted_batch_job_line() -> None:
    out = ("MODEL_NAME=llama2-70b\nJOB_NAME=JAX-llama2-70b\nMAXTEXT_SLURM_DIR=/w/.artifacts/a\n"
           "Submitted batch job 4711\n"
           "[ARTIFACT] /w/4711-JAX-llama2-70b/artifact -> .artifacts/artifact_20260101_0000_ab12\n")
    assert submit_sh_job_id(out) == "4711"
    assert submit_sh_job_id("[ARTIFACT] WARNING: Could not parse job ID. Artifact at: /w") is None


def test_the_failing_line_comes_first() -> None:
    out = ("MODEL_NAME=llama2-70b\nJOB_NAME=JAX-llama2-70b\n"
           "sbatch: error: Batch job submission failed: Invalid node name specified\n"
           "[ARTIFACT] sbatch failed — cleaning up artifact: /w/.artifacts/a\n")
    said = out.splitlines()
    # sbatch's error first, every other line after it in its order.
    assert failing_line_first(out).splitlines() == [said[2], said[0], said[1], said[3]]
    unknown = "x\n!!! Unknown model: q\n!!! Model name resolution failed.\n"
    said = unknown.splitlines()
    assert failing_line_first(unknown).splitlines() == [said[1], said[0], said[2]]
    assert failing_line_first("a\n[ERROR] Job 9 died in prolog before writing any log: "
                              "FAILED\n").startswith("[ERROR] Job 9 died")


# -- the fake toolkit is the real one's stand-in ------------------------------------------------

def run_submit_sh(repo: Path, *args: str, env: dict[str, str] | None = None,
                  ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(repo / "submit.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=False, timeout=60)


def test_fake_toolkit_prints_what_submit_sh_prints(slurm_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    res = run_submit_sh(repo, "70b:my-run:exp1", "-N", "1", "-w", "chi2880", "--", "steps=2",
                        env=slurm_env)
    assert res.returncode == 0, res.stderr
    ws = repo / "outputs"
    patterns = [
        rf"mkdir: created directory '{ws}'", "MODEL_NAME=llama2-70b", "MODEL_NAME_ALIAS=my-run",
        "EXP_TAG=exp1", 'SBATCH_ARGS="-N 1 -w chi2880"', 'PASSTHROUGH_ARGS="steps=2"',
        "JOB_NAME=JAX-llama2-70b-exp1-steps_2", r"\[ARTIFACT\] Building artifact\.\.\.",
        rf"\[ARTIFACT\]   Source : {repo}", rf"\[ARTIFACT\]   Target : {ws}/\.artifacts/"
        r"artifact_\d{8}_\d{6}_[0-9a-f]{4}", r"\[ARTIFACT\] Done in .*",
        rf"MAXTEXT_SLURM_DIR={ws}/\.artifacts/artifact_\w+", r"Submitted batch job (\d+)",
        rf"\[ARTIFACT\] {ws}/\d+-JAX-llama2-70b-exp1-steps_2/artifact -> "
        r"\.artifacts/artifact_\w+"]
    lines = res.stdout.splitlines()
    assert len(lines) == len(patterns), res.stdout
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    job_id = re.fullmatch(patterns[-2], lines[-2]).group(1)  # type: ignore[union-attr]
    job_dir = ws / f"{job_id}-JAX-llama2-70b-exp1-steps_2"
    assert (job_dir / "artifact" / "submit.sh").exists()   # the repo root was snapshotted
    assert os.readlink(job_dir / "log") == f"../{job_dir.name}.log"


def test_fake_toolkit_sbatch_failure_and_job_workspace(slurm_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    ws = tmp_path / "shared" / "jobs"
    res = run_submit_sh(repo, "70b", "-N", "1", "-w", "chi9999", "--", "steps=2",
                        env={**slurm_env, "JOB_WORKSPACE": str(ws)})
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert lines[:2] == [f"mkdir: created directory '{ws.parent}'",
                         f"mkdir: created directory '{ws}'"]
    # The toolkit's output as submit.sh prints it: sbatch's refusal, then the cleanup.
    check_golden(GOLDEN_HERE / "sbatch_failure.txt", _said(res.stdout, tmp=tmp_path))
    cleaned = re.fullmatch(r"\[ARTIFACT\] sbatch failed — cleaning up artifact: (\S+)", lines[-1])
    assert cleaned and not Path(cleaned.group(1)).exists()
    assert Path(cleaned.group(1)).parent == ws / ".artifacts"
    assert not (repo / "outputs").exists()


def test_fake_toolkit_repo_root_test(slurm_env: dict[str, str], tmp_path: Path) -> None:
    """A `.git` file (a worktree) is not a repo root: the parent folder is snapshotted."""
    repo = tmp_path / "parent" / "toolkit"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/toolkit\n")
    res = run_submit_sh(repo, "70b", "-N", "1", "-w", "chi2880", "--", "steps=1",
                        env=slurm_env)
    assert res.returncode == 0, res.stderr
    assert f"[ARTIFACT]   Source : {tmp_path / 'parent'}" in res.stdout.splitlines()
    assert re.search(r"-> \.artifacts/artifact_\w+/toolkit$", res.stdout.splitlines()[-1])


# -- sweepd against it --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["silent", "late-error", "hang"])
async def test_an_unclear_submission_is_looked_up_and_adopted(
        slurm_env: dict[str, str], tmp_path: Path, mode: str) -> None:
    repo = toolkit(tmp_path)
    slurm = cluster(slurm_env, repo, sbatch_shim(tmp_path, mode), timeout_s=8)
    token = fresh(f"unclear-{mode}")
    sub = await slurm.submit(request(token, "chi2863", tmp_path))
    assert sub.job_name == NAME.format(token=token)
    assert sub.note
    check_golden(GOLDEN_HERE / f"adopted_{mode}.txt",
                 _said(f"{sub.note}\n", tmp=tmp_path, token=token, job=sub.backend_id))
    assert list(await token_jobs(slurm_env, token)) == [sub.backend_id]
    status = await wait_state(slurm, sub.backend_id, FINISHED)
    assert status.state is SchedulerState.COMPLETED
    assert "Status: SUCCESS (exit 0)" in sub.log_path.read_text()


async def test_a_job_dead_before_the_check_is_adopted_and_judged_by_slurm(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """submit.sh calls a job that ended badly within its pause a prolog death and exits 1
    after printing the id: the job exists, so it is adopted and the scheduler's word on it
    (FAILED, exit 1) decides, not a refusal."""
    repo = toolkit(tmp_path)
    slurm = cluster(slurm_env, repo, {"FAKE_SUBMIT_CHECK_DELAY_S": "8"})
    token = fresh("prolog")
    sub = await slurm.submit(request(token, "chi2872", tmp_path, env={"FAKE_EXIT": "1"}))
    assert sub.note
    check_golden(GOLDEN_HERE / "adopted_prolog_death.txt",
                 _said(f"{sub.note}\n", token=token, job=sub.backend_id))
    status = await wait_state(slurm, sub.backend_id, FINISHED)
    assert (status.state, status.exit_code) == (SchedulerState.FAILED, 1)


async def test_duplicates_under_the_token_are_cancelled(slurm_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    slurm = cluster(slurm_env, repo, sbatch_shim(tmp_path, "twice"))
    token = fresh("dup")
    sub = await slurm.submit(request(token, "chi2867", tmp_path, env={"FAKE_STEP_SECONDS": "1"}))
    jobs = await token_jobs(slurm_env, token)
    assert len(jobs) == 2 and sub.backend_id == max(jobs, key=int)
    older = min(jobs, key=int)
    assert sub.note and f"duplicate job(s) {older} cancelled" in sub.note
    assert (await wait_state(slurm, older, FINISHED)).state is SchedulerState.CANCELLED
    assert (await wait_state(slurm, sub.backend_id, FINISHED)).state is SchedulerState.COMPLETED


async def test_a_refusal_names_the_failing_line_first(slurm_env: dict[str, str],
                                                      tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    slurm = cluster(slurm_env, repo, {"FAKE_SUBMIT_CHECK_DELAY_S": "0.1"})
    first, second = fresh("ref1"), fresh("ref2")
    with pytest.raises(SubmitRefused) as bad_node:
        await slurm.submit(request(first, "chi9999", tmp_path))
    with pytest.raises(SubmitRefused) as unknown:
        await slurm.submit(JobRequest(token=second, model="nosuch", nodes=["chi2832"],
                                      output_dir=tmp_path))
    # Each refusal as sweepd records it: the failing line first, then what submit.sh printed.
    check_golden_cases(GOLDEN_HERE / "refusals.txt", {
        "bad node": _said(str(bad_node.value), repo=repo, tmp=tmp_path, token=first),
        "unknown model": _said(str(unknown.value), repo=repo, tmp=tmp_path, token=second)})


async def test_logs_are_found_where_job_workspace_points(slurm_env: dict[str, str],
                                                         tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    ws = tmp_path / "shared" / "jobs"
    slurm = cluster(slurm_env, repo, {"JOB_WORKSPACE": str(ws)})
    token = fresh("ws1")
    sub = await slurm.submit(request(token, "chi2868", tmp_path))
    assert sub.log_path == ws / f"{sub.backend_id}-{NAME.format(token=token)}.log"
    assert await slurm.find_by_token(token) == sub
    await wait_state(slurm, sub.backend_id, FINISHED)
    assert "Status: SUCCESS (exit 0)" in sub.log_path.read_text()
    assert not (repo / "outputs").exists()


async def test_without_scontrol_the_log_path_comes_from_job_workspace(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    repo = toolkit(tmp_path)
    ws = tmp_path / "ws"
    blind = tmp_path / "blind.sh"   # scontrol fails; everything else runs
    blind.write_text('#!/bin/bash\n[[ $1 == scontrol ]] && { echo "scontrol: error: '
                     'x" >&2; exit 1; }\nexec "$@"\n')
    blind.chmod(0o755)
    slurm = cluster(slurm_env, repo, {"JOB_WORKSPACE": str(ws)}, prefix=(str(blind),))
    token = fresh("ws2")
    sub = await slurm.submit(request(token, "chi2870", tmp_path))
    assert sub.log_path == ws / f"{sub.backend_id}-{NAME.format(token=token)}.log"
