"""One contract every cluster backend keeps, run over each: the simulated cluster (`sim`),
the real local Slurm clusters (`slurm`, tests/slurm_cluster.py) and the local backend
(`local`, over the fake trainer of tests/local_trainer.py).

What the engine relies on: a submitted job is polled to its end with its exit code; a
failed one says so with the trainer's code; a cancelled one ends CANCELLED and its
processes are gone (where the scheduler is ours to look into; on Slurm, the scheduler's
word and the job's log); `find_by_token` and `live_tokens` name an unfinished job and
forget it at its end; and a new backend object over the same state (a restarted daemon)
finds a job that is running and sees its end.

Each backend is a `Harness`: how to make the backend over a state, and the three jobs the
contract needs of it (one that passes, one that fails with a known code, one that runs
until cancelled, and one long enough to restart under).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
import yaml

from sweepd.clusters.base import JobRequest, JobStatus, SchedulerState, Submitted
from sweepd.clusters.local import LocalCluster
from sweepd.clusters.local.wrapper import pid_path, start_ticks
from sweepd.clusters.sim import SimCluster
from sweepd.clusters.slurm import SlurmCluster
from sweepd.config import LocalConfig
from tests.local_trainer import train_command, write_trainer
from tests.slurm_cluster import MAXTEXT_FIXTURE

Job = Literal["pass", "fail", "long", "slow"]
Backend = SimCluster | SlurmCluster | LocalCluster
POLL_S = 0.1
LIMIT_S = 90.0


@dataclass
class Harness:
    """One backend under the contract. `make()`: a new backend object over the same state
    (the first, or a restarted daemon's). `request(token, job)`: the submission of one of
    the contract's jobs. `fail_code`: the exit code of the `fail` job. `processes(sub)`: the
    pids of the job's processes still alive, None where the backend's processes are not
    ours to see (Slurm's run under slurmd)."""

    name: str
    make: Callable[[], Backend]
    request: Callable[[str, Job], JobRequest]
    fail_code: int
    processes: Callable[[Submitted], list[int] | None]
    # A line of the `long` job's log once its trainer runs (a cancel while the process is
    # still starting is another case, tested per backend).
    running_text: str = "completed step"
    made: list[Backend] = field(default_factory=list)

    def backend(self) -> Backend:
        made = self.make()
        self.made.append(made)
        return made


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            fields = text[text.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                found.append(int(stat.parent.name))
    return found


# -- the simulated cluster -------------------------------------------------------------------

def _sim(tmp_path: Path) -> Harness:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "cluster": {"nodes": "chi[2832,2863]", "time_scale": 0.0005, "seed": 2},
        "models": {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400}},
        # batch 3 hangs at compile: the job that runs until cancelled.
        "faults": [{"kind": "hang", "phase": "compile", "model": "llama2-70b", "batch": 3}],
    }))
    state = tmp_path / "state"
    # pass: 3 steps; fail: batch 30 is over the model's 14 (OOM, exit 1); slow: 400 steps.
    batch = {"pass": "2", "fail": "30", "long": "3", "slow": "2"}
    steps = {"pass": "3", "fail": "3", "long": "3", "slow": "400"}

    def request(token: str, job: Job) -> JobRequest:
        return JobRequest(token=token, model="llama2-70b", nodes=["chi2832"],
                          output_dir=tmp_path / "out",
                          overrides={"per_device_batch_size": batch[job], "steps": steps[job]})

    def processes(sub: Submitted) -> list[int]:
        record = json.loads((state / "jobs" / f"{sub.backend_id}.json").read_text())
        return _group_members(record["pgid"]) if record.get("pgid") else []

    return Harness("sim", lambda: SimCluster(state, scenario), request, 1, processes,
                   running_text="Initializing JAX distributed")


# -- the local backend -----------------------------------------------------------------------

def _local(tmp_path: Path) -> Harness:
    trainer = write_trainer(tmp_path)
    settings = LocalConfig(train_command=train_command(trainer), node="box1", cancel_grace_s=2,
                           workdir=tmp_path, lock=tmp_path / "slot.lock")
    # pass: 15 steps of 0.02 s; fail: XLA's OOM at compile (exit 1); long: hangs at step 5;
    # slow: 15 steps of 0.5 s.
    mode = {"pass": "pass", "fail": "oom", "long": "hang", "slow": "slow"}

    def request(token: str, job: Job) -> JobRequest:
        return JobRequest(token=token, model="tiny-llama", nodes=["box1"],
                          output_dir=tmp_path / "out",
                          overrides={"per_device_batch_size": "2", "steps": "15"},
                          env={"FAKE_MODE": mode[job]})

    def processes(sub: Submitted) -> list[int]:
        # The wrapper writes its pid and the trainer's; the trainer leads its own process
        # group (started so, to be ended whole), and the wrapper lives until it ends.
        pids = json.loads(pid_path(tmp_path / "state" / "jobs", sub.backend_id).read_text())
        wrapper = [pids["wrapper"][0]] if start_ticks(pids["wrapper"][0]) == \
            pids["wrapper"][1] else []
        return wrapper + (_group_members(pids["trainer"][0]) if pids["trainer"] else [])

    return Harness("local", lambda: LocalCluster(tmp_path / "state", settings), request, 1,
                   processes)


# -- Slurm -----------------------------------------------------------------------------------

@dataclass
class _SlurmSettings:
    """The `[cluster.slurm]` settings the backend reads, direct mode over the stand-in
    trainer (tests/fixtures/maxtext/fake_train.py)."""

    slurm_conf: Path
    mode: str = "direct"
    repo: Path | None = None
    command_prefix: tuple[str, ...] = ()
    partition: str | None = None
    time_limit: str | None = "5"
    train_command: tuple[str, ...] = (sys.executable,
                                      str(MAXTEXT_FIXTURE / "fake_train.py"))
    extra_sbatch: tuple[str, ...] = ()
    allow_resume: bool = False


def _slurm(tmp_path: Path, env: dict[str, str]) -> Harness:
    settings = _SlurmSettings(slurm_conf=Path(env["SLURM_CONF"]))
    steps = {"pass": "2", "fail": "2", "long": "600", "slow": "40"}
    step_s = {"pass": "0.05", "fail": "0.05", "long": "0.1", "slow": "0.15"}

    def request(token: str, job: Job) -> JobRequest:
        return JobRequest(token=token, model="llama2-70b", nodes=["chi2881"],
                          output_dir=tmp_path / "out", overrides={"steps": steps[job]},
                          env={"FAKE_STEP_SECONDS": step_s[job],
                               **({"FAKE_EXIT": "3"} if job == "fail" else {})})

    return Harness("slurm", lambda: SlurmCluster(settings), request, 3, lambda _: None)


@pytest.fixture(params=["sim", pytest.param("slurm", marks=pytest.mark.slurm), "local"])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    if request.param == "slurm":
        made = _slurm(tmp_path, request.getfixturevalue("slurm_env"))
    else:
        made = _sim(tmp_path) if request.param == "sim" else _local(tmp_path)
    yield made
    # A job a failed test left running is ended with it.
    for backend in made.made:
        for job_id in await backend.live_tokens() if made.name != "slurm" else []:
            with contextlib.suppress(Exception):
                await backend.cancel(job_id)
        await backend.close()
    if made.name == "sim":
        for record in (tmp_path / "state" / "jobs").glob("*.json"):
            pgid = json.loads(record.read_text()).get("pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)


def _token() -> str:
    return f"ct{uuid.uuid4().hex[:10]}"


async def _until(backend: Backend, job_id: str,
                 done: Callable[[JobStatus], bool]) -> JobStatus:
    deadline = time.monotonic() + LIMIT_S
    while True:
        status = (await backend.poll([job_id]))[job_id]
        if done(status):
            return status
        assert time.monotonic() < deadline, f"job {job_id} stuck at {status}"
        await asyncio.sleep(POLL_S)


def _finished(status: JobStatus) -> bool:
    return status.state.finished and status.exit_code is not None


async def _printing(sub: Submitted, text: str = "completed step") -> None:
    """Until the job's log shows `text`: its trainer runs (a cancel before then ends a
    process still starting, which the contract does not test)."""
    deadline = time.monotonic() + LIMIT_S
    while not (sub.log_path.exists() and text in sub.log_path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"{sub.log_path}: never printed {text!r}"
        await asyncio.sleep(POLL_S)


async def test_a_job_is_polled_to_its_end_with_exit_code_zero(harness: Harness) -> None:
    backend = harness.backend()
    token = _token()
    sub = await backend.submit(harness.request(token, "pass"))
    status = await _until(backend, sub.backend_id, _finished)
    assert (status.state, status.exit_code) == (SchedulerState.COMPLETED, 0)
    assert "completed step" in sub.log_path.read_text()
    assert sub.backend_id not in await backend.live_tokens()
    assert await backend.find_by_token(_token()) is None


async def test_a_failed_job_ends_failed_with_the_trainers_exit_code(harness: Harness) -> None:
    backend = harness.backend()
    sub = await backend.submit(harness.request(_token(), "fail"))
    status = await _until(backend, sub.backend_id, _finished)
    assert (status.state, status.exit_code) == (SchedulerState.FAILED, harness.fail_code)


async def test_a_running_job_is_named_by_its_token_and_cancelled_whole(
        harness: Harness) -> None:
    backend = harness.backend()
    token = _token()
    sub = await backend.submit(harness.request(token, "long"))
    await _until(backend, sub.backend_id, lambda s: s.state is SchedulerState.RUNNING)
    await _printing(sub, harness.running_text)
    assert await backend.find_by_token(token) == sub
    assert (await backend.live_tokens()).get(sub.backend_id) == token
    alive = harness.processes(sub)
    assert alive is None or alive != [], "the job's processes are not to be seen running"
    await backend.cancel(sub.backend_id)
    status = await _until(backend, sub.backend_id, lambda s: s.state.finished)
    assert status.state is SchedulerState.CANCELLED
    assert sub.backend_id not in await backend.live_tokens()
    await backend.cancel(sub.backend_id)   # a finished job's cancel is a no-op
    assert (await backend.poll([sub.backend_id]))[sub.backend_id].state is \
        SchedulerState.CANCELLED
    # Its processes are gone (the whole group: a trainer's children too); on Slurm the
    # job's log has the trainer's own word for the SIGTERM.
    deadline = time.monotonic() + LIMIT_S
    while (left := harness.processes(sub)):
        assert time.monotonic() < deadline, f"still running after the cancel: {left}"
        await asyncio.sleep(POLL_S)
    if left is None:
        await _printing(sub, "CANCELLED")


async def test_a_new_backend_over_the_same_state_finds_the_running_job_and_its_end(
        harness: Harness) -> None:
    first = harness.backend()
    token = _token()
    sub = await first.submit(harness.request(token, "slow"))
    await _until(first, sub.backend_id, lambda s: s.state is SchedulerState.RUNNING)
    await first.close()   # the daemon stops mid-job
    again = harness.backend()
    assert await again.find_by_token(token) == sub
    assert (await again.live_tokens()).get(sub.backend_id) == token   # still under way
    status = await _until(again, sub.backend_id, _finished)
    assert (status.state, status.exit_code) == (SchedulerState.COMPLETED, 0)
    assert sub.backend_id not in await again.live_tokens()
    assert await again.find_by_token(token) in (sub, None)   # a finished job may be forgotten
