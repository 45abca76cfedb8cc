"""The engine's submission decisions on the simulated cluster, each recorded under its rule
with its evidence: a submission the spec makes impossible (`submit.spec_refused`; one the
scheduler refuses, `submit.refused`, on real Slurm: tests/test_slurm_partition.py), and a
job a crash left in `submitting` that the next process finds in the queue by its token
(`recovery.adopt`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sweepd.app.daemon import open_parts
from sweepd.clusters.base import JobRequest, Submitted
from sweepd.core.control import SPEC_REFUSED
from sweepd.core.states import JobState, SweepState
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import perf_spec, sim_config, write_scenario


async def _stepped_until_stopped(store: Store, step: object, sweep_id: int) -> None:
    for _ in range(10):
        await step()  # type: ignore[operator]
        if (await store.sweeps.get(sweep_id)).state == SweepState.AWAITING_DECISION:
            return


async def test_a_job_name_no_carrying_can_fit_stops_as_the_specs_refusal(
        tmp_path: Path) -> None:
    # An env setting rides in the job name and cannot be carried outside it: over the
    # limit whatever leaves. Created in the store as an older sweepd accepted it.
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = await parts.store.sweeps.create(
            "model-perf", "t", perf_spec(values=[4], env={"X": "v" * 240}))
        await _stepped_until_stopped(parts.store, parts.engine.step, sweep_id)
        sweep = await parts.store.sweeps.get(sweep_id)
        assert sweep.state == SweepState.AWAITING_DECISION
        assert sweep.reason is not None
        events = await parts.store.events.of_sweep(sweep_id)
        [stop] = [e for e in events if e.rule == SPEC_REFUSED and e.job_id is None
                  and e.run_id is None]
        assert stop.to_state == SweepState.AWAITING_DECISION
        assert stop.evidence is not None
        # The stop's status line, and its evidence: what cannot be carried outside the name.
        check_golden_cases(GOLDEN / "submit_rules" / "name_over_the_limit.txt",
                           {"status": sweep.reason, "evidence": stop.evidence})
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.FAILED and job.backend_id is None
        assert any(e.rule == SPEC_REFUSED and e.job_id == job.id for e in events)
        # The stop's message says a resume meets it again: only a new spec gets past it.
        said = [e.reason for e in await parts.store.events.of_sweep(sweep_id, kind="progress")]
        assert any("as a new sweep" in line for line in said), said


async def test_a_job_a_crash_left_submitting_is_adopted_from_the_queue(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        backend = parts.engine.backend
        real_submit = backend.submit
        made: list[Submitted] = []

        async def submit_then_die(request: JobRequest) -> Submitted:
            made.append(await real_submit(request))   # the scheduler has the job ...
            await asyncio.Event().wait()              # ... and the process dies here
            raise AssertionError("unreachable")

        backend.submit = submit_then_die  # type: ignore[method-assign]
        sweep_id = int((await parts.service.submit(perf_spec(values=[4])))["id"])
        step = asyncio.create_task(parts.engine.step())
        while not made:
            await asyncio.sleep(0.01)
        step.cancel()
        await asyncio.gather(step, return_exceptions=True)
        [job] = await parts.store.jobs.of_sweep(sweep_id)
        assert job.state == JobState.SUBMITTING and job.backend_id is None
    async with open_parts(config) as parts:   # the next process
        for _ in range(10):
            await parts.engine.step()
            [job] = await parts.store.jobs.of_sweep(sweep_id)
            if job.state != JobState.SUBMITTING:
                break
        assert job.backend_id == made[0].backend_id   # the same job, not a second one
        [adopt] = [e for e in await parts.store.events.of_sweep(sweep_id)
                   if e.rule == "recovery.adopt"]
        assert adopt.job_id == job.id and adopt.to_state == JobState.QUEUED
        check_golden(GOLDEN / "submit_rules" / "adopted_after_restart.txt",
                     scrubbed(f"{adopt.reason}\n", job=job.backend_id))
        assert len(await parts.store.jobs.of_sweep(sweep_id)) == 1
