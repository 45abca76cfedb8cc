"""Every allowed transition succeeds with an event; every forbidden one is refused."""

from __future__ import annotations

import itertools

import pytest

from sweepd.core.states import (
    JOB_TRANSITIONS,
    RUN_TRANSITIONS,
    SWEEP_TRANSITIONS,
    JobState,
    RunState,
    SweepState,
)
from sweepd.store.rows import RunParams
from sweepd.store.store import InvalidTransition, Store


async def _force(store: Store, table: str, row_id: int, state: str) -> None:
    async with store.tx() as conn:
        await conn.execute(f"UPDATE {table} SET state = ? WHERE id = ?", (state, row_id))


async def _fixture_rows(store: Store) -> tuple[int, int, int]:
    sweep_id = await store.sweeps.create("model-perf", "t", {"model": "llama2-70b"})
    run = await store.runs.add(sweep_id, "per_device_batch_size=8",
                                   RunParams(overrides={"b": 8}), "n1", "test")
    job = await store.jobs.create(run, "tok-1", "JAX-x", "n1")
    return sweep_id, run.id, job.id


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(SweepState, SweepState)))
async def test_sweep_transition(store: Store, src: SweepState, dst: SweepState) -> None:
    sweep_id, _, _ = await _fixture_rows(store)
    await _force(store, "sweeps", sweep_id, src)
    before = len(await store.events.of_sweep(sweep_id))
    if dst in SWEEP_TRANSITIONS[src]:
        await store.sweeps.transition(sweep_id, dst, "because", rule="test.rule")
        assert (await store.sweeps.get(sweep_id)).state == dst
        events = await store.events.of_sweep(sweep_id)
        assert len(events) == before + 1
        assert (events[-1].from_state, events[-1].to_state, events[-1].rule) == (src, dst,
                                                                                "test.rule")
    else:
        with pytest.raises(InvalidTransition):
            await store.sweeps.transition(sweep_id, dst, "because")
        assert (await store.sweeps.get(sweep_id)).state == src
        assert len(await store.events.of_sweep(sweep_id)) == before


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(RunState, RunState)))
async def test_run_transition(store: Store, src: RunState, dst: RunState) -> None:
    _sweep_id, run_id, _ = await _fixture_rows(store)
    await _force(store, "runs", run_id, src)
    if dst in RUN_TRANSITIONS[src]:
        await store.runs.transition(run_id, dst, "because", tgs=1.0)
        run = await store.runs.get(run_id)
        assert (run.state, run.tgs) == (dst, 1.0)
    else:
        with pytest.raises(InvalidTransition):
            await store.runs.transition(run_id, dst, "because", tgs=1.0)
        run = await store.runs.get(run_id)
        assert (run.state, run.tgs) == (src, None)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(JobState, JobState)))
async def test_job_transition(store: Store, src: JobState, dst: JobState) -> None:
    sweep_id, _, job_id = await _fixture_rows(store)
    await _force(store, "jobs", job_id, src)
    before = len(await store.events.of_sweep(sweep_id))
    if dst in JOB_TRANSITIONS[src]:
        await store.jobs.transition(job_id, dst, "because", failure_class="oom")
        job = await store.jobs.get(job_id)
        assert (job.state, job.failure_class) == (dst, "oom")
        assert len(await store.events.of_sweep(sweep_id)) == before + 1
    else:
        with pytest.raises(InvalidTransition):
            await store.jobs.transition(job_id, dst, "because", failure_class="oom")
        job = await store.jobs.get(job_id)
        assert (job.state, job.failure_class) == (src, None)
        assert len(await store.events.of_sweep(sweep_id)) == before


async def test_unknown_field_is_refused(store: Store) -> None:
    _, _, job_id = await _fixture_rows(store)
    with pytest.raises(ValueError, match="not job fields"):
        await store.jobs.transition(job_id, JobState.QUEUED, "x", bogus=1)
