"""Duplicate submissions on real Slurm: a job carrying a token of this store that its row
does not follow is cancelled and reported; another store's token is left alone; a
write-ahead job waits for the submitter an earlier process left running, and ends it
once its deadline has passed."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweepd.clusters.factory import make_backend
from sweepd.clusters.slurm import token_of
from sweepd.clusters.submitguard import guard_path, record_group
from sweepd.config import Config
from sweepd.core.engine import Engine
from sweepd.core.states import JobState, SweepState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from sweepd.util.clock import Clock
from tests.simrun import write_scenario
from tests.slurm_cluster import cluster_env
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm

NODE = "chi2872"


def _sbatch(comment: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", "-w", NODE, f"--comment={comment}",
                          "-o", "/dev/null", "--wrap", "sleep 300"],
                         env={**os.environ, **cluster_env()}, check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.strip().split(";")[0]


def _state(job_id: str) -> str:
    out = subprocess.run(["squeue", "--noheader", "--states=all", "-j", job_id, "-O", "State"],
                         env={**os.environ, **cluster_env()}, capture_output=True, text=True,
                         timeout=30).stdout
    return out.strip()


async def _engine(tmp_path: Path) -> tuple[Engine, Store, Config]:
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    backend, _ = make_backend(config)
    return Engine(store, backend, Clock(), config), store, config


async def _sweep_with_job(store: Store, token: str, backend_id: str | None) -> int:
    sweep_id = await store.sweeps.create("node-perf", "dup", {"kind": "node-perf",
                                                              "nodes": "chi[2870,2872,2880]"})
    # Awaiting a decision: the engine follows its jobs but plans nothing for it.
    await store.sweeps.transition(sweep_id, SweepState.RUNNING, "test")
    await store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "test")
    run = await store.runs.add(sweep_id, "r", RunParams(), NODE, "test")
    job = await store.jobs.create(run, token, job_name="", nodes=NODE)
    if backend_id is not None:
        await store.jobs.transition(job.id, JobState.QUEUED, "test", backend_id=backend_id)
    return job.id


async def test_a_duplicate_or_unowned_token_is_cancelled_and_reported(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    engine, store, _ = await _engine(tmp_path)
    mine = await store.daemon_state.store_id()
    token = f"sw1-0badc0de.{mine}"
    followed = _sbatch(f"sweepd:{token}")
    duplicate = _sbatch(f"sweepd:{token}")
    unowned = _sbatch(f"sweepd:sw1-12345678.{mine}")
    foreign = _sbatch("sweepd:sw1-12345678.abcdef")   # another sweepd's: never touched
    try:
        await _sweep_with_job(store, token, followed)
        await engine.step()
        await asyncio.sleep(2)
        assert _state(duplicate).startswith("CANCELLED")
        assert _state(unowned).startswith("CANCELLED")
        assert not _state(followed).startswith("CANCELLED")
        assert not _state(foreign).startswith("CANCELLED")
        events = await store.events.of_sweep(1)
        cancelled = [e for e in events if e.rule == "recovery.duplicate_cancelled"]
        assert sorted(duplicate in e.reason or unowned in e.reason for e in cancelled) \
            == [True, True]
        progress = [e.reason for e in events if e.kind == "progress"]
        assert any(duplicate in p for p in progress) and any(unowned in p for p in progress)
    finally:
        subprocess.run(["scancel", followed, duplicate, unowned, foreign],
                       env={**os.environ, **cluster_env()}, check=False, timeout=30)
        await engine.close()
        await store.close()


async def test_an_earlier_submitter_is_awaited_then_ended_at_its_deadline(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    engine, store, config = await _engine(tmp_path)
    token = f"sw1-feedf00d.{await store.daemon_state.store_id()}"
    job_id = await _sweep_with_job(store, token, None)
    guard = guard_path(config.daemon.outputs / "sweep-1", token)
    # An earlier daemon's submitter, the daemon killed: the process holds the guard alone.
    guard.parent.mkdir(parents=True)
    fd = os.open(guard, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            pass_fds=(fd,), start_new_session=True)
    record_group(fd, proc.pid)
    os.close(fd)
    try:
        await store.jobs.update(job_id, submit_deadline=engine.clock.now() + 3600)
        await engine.step()
        assert (await store.jobs.get(job_id)).state == JobState.SUBMITTING
        assert proc.poll() is None, "the submitter was ended before its deadline"
        await store.jobs.update(job_id, submit_deadline=engine.clock.now() - 1)
        await engine.step()
        assert await asyncio.to_thread(proc.wait, 10) == -9
        rules = [e.rule for e in await store.events.of_sweep(1)]
        assert "recovery.wait_submitter" in rules and "recovery.submitter_ended" in rules
    finally:
        if proc.poll() is None:
            proc.kill()
        await engine.close()
        await store.close()


def test_the_token_is_read_from_the_comment_or_the_submit_sh_name() -> None:
    assert token_of("JAX-x", "sweepd:sw3-1a2b3c4d.e5f6a7") == "sw3-1a2b3c4d.e5f6a7"
    name = "JAX-llama2-70b-steps_15-_env_SWEEPD_TOKEN_sw3-1a2b3c4d.e5f6a7-more_1"
    assert token_of(name, "") == "sw3-1a2b3c4d.e5f6a7"
    assert token_of("JAX-llama2-70b-_env_SWEEPD_TOKEN_sw12-0badc0de", "(null)") \
        == "sw12-0badc0de"
    assert token_of("JAX-llama2-70b-steps_15", "someone else's") is None
