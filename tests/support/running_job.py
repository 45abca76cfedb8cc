"""A sweep with one job the scheduler says runs, over a real store: what the log-reading
tests follow."""

from __future__ import annotations

from pathlib import Path

from sweepd.core.states import JobState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store


async def running_job(store: Store, log: Path, now: float = 0.0) -> int:
    """A job the scheduler says runs (backend id 10001) writing `log`, heard from at `now`;
    the sweep's id."""
    sweep_id = await store.sweeps.create("model-perf", "t", {"model": "llama2-70b"})
    run = await store.runs.add(sweep_id, "per_device_batch_size=8",
                               RunParams(overrides={"b": 8}), "n1", "test")
    job = await store.jobs.create(run, "tok-1", "JAX-x", "n1")
    await store.jobs.transition(job.id, JobState.QUEUED, "submitted", backend_id="10001",
                                log_path=str(log))
    await store.jobs.transition(job.id, JobState.RUNNING, "scheduler says RUNNING",
                                rule="scheduler.running", last_output_at=now)
    return sweep_id
