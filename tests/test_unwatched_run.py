"""A job that ran and ended while nobody watched (the daemon was down, or its whole run fell
between two passes) leaves the trail a watched job leaves: queued -> running -> done. The
crash tests compare a restarted sweep's events with an uninterrupted one's; a job concluded
straight from queued made that comparison depend on how long a restart took."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sweepd.app.daemon import open_parts
from sweepd.core.states import JobState
from tests.simrun import perf_spec, sim_config, write_scenario


async def test_a_job_that_ran_unwatched_is_recorded_as_having_run(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = int((await parts.service.submit(perf_spec(values=[4])))["id"])
        await parts.engine.step()
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.QUEUED and job.backend_id, job
        backend = parts.engine.backend
        for _ in range(600):     # the job runs to its end before sweepd looks again
            if (await backend.poll([job.backend_id]))[job.backend_id].state.finished:
                break
            await asyncio.sleep(0.05)
        for _ in range(50):
            await parts.engine.step()
            [job, *_] = await parts.store.jobs.of_sweep(sweep_id)
            if job.state not in (JobState.QUEUED, JobState.RUNNING):
                break
        assert job.state == JobState.DONE, (job.state, job.failure_class)
        trail = [(e.from_state, e.to_state, e.rule)
                 for e in await parts.store.events.of_sweep(sweep_id)
                 if e.kind == "transition" and e.job_id == job.id]
        assert [(f, t) for f, t, _ in trail][-2:] == [("queued", "running"),
                                                      ("running", "done")], trail
        assert trail[-2][2] == "log.first_output"
