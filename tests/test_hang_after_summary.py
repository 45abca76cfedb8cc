"""A job whose log already has its end-of-run summary is never called hung: after a
controller outage it may sit in COMPLETING, silent, for longer than the hang timeout, and a
hang cancel then would throw away a complete measurement."""

from __future__ import annotations

from pathlib import Path

from sweepd.clusters.factory import make_backend
from sweepd.config import load_config
from sweepd.core.engine import Engine
from sweepd.core.judge import check_hang
from sweepd.core.states import JobState, RunState, SweepState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.simrun import perf_spec


async def _running_job(store: Store, **fields: object) -> int:
    sweep_id = await store.sweeps.create("model-perf", "t", perf_spec(values=[4]))
    await store.sweeps.transition(sweep_id, SweepState.RUNNING, "started", rule="test")
    run = await store.runs.add(sweep_id, "per_device_batch_size=4",
                                   RunParams(overrides={"per_device_batch_size": 4}),
                                   "chi2832", "test", "test")
    await store.runs.transition(run.id, RunState.ACTIVE, "submitting", rule="test")
    job = await store.jobs.create(run, "tok", job_name="JAX-llama2-70b", nodes="chi2832")
    await store.jobs.transition(job.id, JobState.QUEUED, "submitted", rule="test",
                                    backend_id="1")
    await store.jobs.transition(job.id, JobState.RUNNING, "runs", rule="test",
                                    last_output_at=0.0, phase="summary", last_step=14, **fields)
    return job.id


async def _judge_after_silence(tmp_path: Path, **fields: object) -> JobState:
    config = load_config(None, {"daemon.state_dir": str(tmp_path)})
    store = await Store.open(tmp_path / "db.sqlite")
    backend, clock = make_backend(config)
    try:
        engine = Engine(store, backend, clock, config)
        job_id = await _running_job(store, **fields)
        silent = 10 * engine.hang_limit()
        await check_hang(engine, await store.jobs.get(job_id), silent)
        return (await store.jobs.get(job_id)).state
    finally:
        await backend.close()
        await store.close()


async def test_a_job_whose_log_says_it_ended_is_not_hung(tmp_path: Path) -> None:
    state = await _judge_after_silence(tmp_path, summary_status="SUCCESS", summary_exit=0)
    assert state == JobState.RUNNING


async def test_a_silent_job_without_its_summary_is_hung(tmp_path: Path) -> None:
    assert await _judge_after_silence(tmp_path) == JobState.HUNG
