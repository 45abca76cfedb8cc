"""An abort that lands while a job's submission is in flight (the engine awaits the
scheduler, the socket API runs meanwhile): the job the scheduler then reports must be
cancelled, not left running untracked, and the pass must not fail."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sweepd.app.daemon import open_parts
from sweepd.clusters.base import JobRequest, JobStatus, SchedulerState, Submitted
from sweepd.core.finish import finish
from sweepd.core.states import JobState, RunState
from sweepd.kinds.api import Finished
from tests.simrun import perf_spec, sim_config, write_scenario


async def test_an_abort_during_a_submission_cancels_the_job_it_made(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        backend = parts.engine.backend
        submitting, go_on = asyncio.Event(), asyncio.Event()
        real_submit = backend.submit

        async def slow_submit(request: JobRequest) -> Submitted:
            submitting.set()
            await go_on.wait()            # the scheduler is slow to answer
            return await real_submit(request)

        backend.submit = slow_submit      # type: ignore[method-assign]
        sweep_id = int((await parts.service.submit(perf_spec(values=[4])))["id"])
        step = asyncio.create_task(parts.engine.step())
        await asyncio.wait_for(submitting.wait(), 30)
        await parts.service.abort(sweep_id)
        go_on.set()
        await asyncio.wait_for(step, 30)   # no InvalidTransition out of the pass
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        events = await parts.store.events.of_sweep(sweep_id)
        assert job.state == JobState.CANCELLED and job.backend_id, job
        assert "submit.late_cancel" in [e.rule for e in events]
        # The scheduler ends the job (a cancel takes effect asynchronously).
        for _ in range(300):
            status = (await backend.poll([job.backend_id]))[job.backend_id]
            if status.state.finished:
                break
            await asyncio.sleep(0.1)
        assert status.state == SchedulerState.CANCELLED, status


async def test_an_abort_while_the_pass_polls_does_not_end_the_pass(tmp_path: Path) -> None:
    """The pass read the job as queued, the scheduler then says RUNNING; an abort landed
    in between (the socket API runs while the pass awaits the scheduler). The pass must
    leave the cancelled job alone, not fail (a failed pass ends the daemon)."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        backend = parts.engine.backend
        sweep_id = int((await parts.service.submit(perf_spec(values=[4])))["id"])
        await parts.engine.step()
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.QUEUED and job.backend_id, job
        real_poll = backend.poll

        async def poll_meanwhile_aborted(ids: list[str]) -> dict[str, JobStatus]:
            await parts.service.abort(sweep_id)
            await real_poll(ids)
            return {i: JobStatus(SchedulerState.RUNNING) for i in ids}

        backend.poll = poll_meanwhile_aborted  # type: ignore[method-assign]
        parts.engine.poll_clock.last = 0.0   # the poll is due now
        await asyncio.wait_for(parts.engine.step(), 30)
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.CANCELLED, job
        assert (await parts.store.sweeps.get(sweep_id)).state == "aborted"
        events = await parts.store.events.of_sweep(sweep_id)
        assert "scheduler.running" not in [e.rule for e in events]


async def test_cancels_flushed_by_an_abort_and_the_pass_at_once_go_once_each(
        tmp_path: Path) -> None:
    """An abort over the socket sends its scancels while the pass sends its own: each queued
    cancel goes once, and neither caller fails (a failed pass ends the daemon)."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        engine, sent = parts.engine, []
        go_on = asyncio.Event()

        async def slow_cancel(backend_id: str) -> None:
            sent.append(backend_id)
            await go_on.wait()            # the scheduler is slow to answer

        engine.backend.cancel = slow_cancel  # type: ignore[method-assign]
        for backend_id in ("101", "102", "103"):
            engine.cancel_later(backend_id)
        first = asyncio.create_task(engine.flush_cancels())
        second = asyncio.create_task(engine.flush_cancels())
        await asyncio.sleep(0.05)
        go_on.set()
        await asyncio.wait_for(asyncio.gather(first, second), 30)
        assert sorted(sent) == ["101", "102", "103"]


async def test_a_verdict_reached_with_runs_open_leaves_nothing_on_the_cluster(
        tmp_path: Path) -> None:
    """A planner may decide while runs are still out (a time budget spent mid-wave): their
    jobs are cancelled and their runs ended with the verdict, not left running for nobody."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        engine = parts.engine
        sweep_id = int((await parts.service.submit(perf_spec(values=[4, 8])))["id"])
        await engine.step()
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.QUEUED and job.backend_id, job
        await finish(engine, await parts.store.sweeps.get(sweep_id), Finished(True, "verdict"))
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.CANCELLED, job
        assert {r.state for r in await parts.store.runs.of_sweep(sweep_id)} == {RunState.CANCELLED}
        assert (await parts.store.sweeps.get(sweep_id)).state == "done"
        for _ in range(300):   # the scheduler was told (a cancel takes effect asynchronously)
            status = (await engine.backend.poll([job.backend_id]))[job.backend_id]
            if status.state.finished:
                break
            await asyncio.sleep(0.1)
        assert status.state == SchedulerState.CANCELLED, status
