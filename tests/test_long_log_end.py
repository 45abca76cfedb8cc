"""A job's log is read to its end before the job is judged: a chatty job (NCCL debug
output, warnings) can leave more than one read's worth (1 MiB) unread when it ends, and
its steps, summary or failure line are in that rest."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sweepd.app.daemon import open_parts
from sweepd.core.states import JobState
from tests.simrun import perf_spec, sim_config, write_scenario

FILLER = "NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC/read " + "x" * 60 + "\n"


async def test_a_job_with_megabytes_of_log_left_at_its_end_is_judged_on_all_of_it(
        tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = int((await parts.service.submit(perf_spec(values=[4])))["id"])
        await parts.engine.step()
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.backend_id and job.log_path, job
        backend = parts.engine.backend
        for _ in range(600):     # the job runs to its end before sweepd reads its log
            if (await backend.poll([job.backend_id]))[job.backend_id].state.finished:
                break
            await asyncio.sleep(0.05)
        log = Path(job.log_path)
        text = log.read_text()
        head, sep, rest = text.partition("\n")
        # 3 MiB of chatter between the first line and the steps.
        log.write_text(head + sep + FILLER * (3 * (1 << 20) // len(FILLER)) + rest)
        for _ in range(50):
            await parts.engine.step()
            [job, *_] = await parts.store.jobs.of_sweep(sweep_id)
            if job.state not in (JobState.QUEUED, JobState.RUNNING):
                break
        assert job.state == JobState.DONE and job.tgs, (job.state, job.failure_class,
                                                        job.failure_detail)
        assert job.log_offset == log.stat().st_size
