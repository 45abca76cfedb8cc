"""An abort that lands while a job's submission is in flight (the engine awaits the
scheduler, the socket API runs meanwhile): the job the scheduler then reports must be
cancelled, not left running untracked, and the pass must not fail."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sweepd.app.daemon import open_parts
from sweepd.clusters.base import JobRequest, SchedulerState, Submitted
from sweepd.core.states import JobState
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
        [job] = await parts.store.jobs(sweep_id)
        events = await parts.store.events(sweep_id)
        assert job.state == JobState.CANCELLED and job.backend_id, job
        assert "submit.late_cancel" in [e.rule for e in events]
        # The scheduler ends the job (a cancel takes effect asynchronously).
        for _ in range(300):
            status = (await backend.poll([job.backend_id]))[job.backend_id]
            if status.state.finished:
                break
            await asyncio.sleep(0.1)
        assert status.state == SchedulerState.CANCELLED, status
