"""The pass judges only jobs with something to judge (issue 24, scale): `nothing_to_judge`
is read off the job's row and the scheduler's word, and it holds only where `judge` would
do nothing at all. No timing: the tests count judge calls and what judge touched."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

import sweepd.core.engine as engine_mod
import sweepd.core.planning as planning_mod
from sweepd.clusters.base import ClusterBackend, JobStatus, SchedulerState
from sweepd.core.engine import Engine
from sweepd.core.judge import judge, nothing_to_judge
from sweepd.core.states import JOB_ACTIVE, JobState
from sweepd.monitor.tail import LOST
from sweepd.sim.logfmt import summary_lines
from sweepd.store.rows import Job, Sweep
from sweepd.store.store import Store
from sweepd.util.clock import Clock
from tests.support.service import _config, _seed

NOW = 10_000.0
LIMIT = 600.0


class _Scheduler:
    """Every job RUNNING unless the test says otherwise; cancels recorded."""

    name = "scheduler"
    submit_timeout_s = 0.0

    def __init__(self) -> None:
        self.states: dict[str, SchedulerState] = {}
        self.cancelled: list[str] = []

    async def close(self) -> None:
        return None

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        return {b: JobStatus(self.states.get(b, SchedulerState.RUNNING)) for b in backend_ids}

    async def live_tokens(self) -> dict[str, str]:
        return {}

    async def cancel(self, backend_id: str) -> None:
        self.cancelled.append(backend_id)


@asynccontextmanager
async def _engine(tmp_path: Path) -> AsyncIterator[tuple[Engine, _Scheduler]]:
    config = _config(tmp_path)
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    scheduler = _Scheduler()
    engine = Engine(store, cast(ClusterBackend, scheduler), Clock(1.0), config)
    try:
        yield engine, scheduler
    finally:
        await engine.close()
        await store.close()


async def test_a_pass_judges_only_the_jobs_that_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five running jobs: the first pass records the scheduler's word on each (five judge
    calls); then a pass with the scheduler asked again and saying the same, none; one job
    ending (its log's summary, the scheduler's COMPLETED), one call, and that job concluded;
    one job silent past the hang limit, one call, and that job called hung and cancelled.
    (The sweep's planning is left out: only the judging is counted.)"""
    judged: list[int] = []
    real = engine_mod.judge

    async def no_plan(engine: Engine, sweep: Sweep) -> None:
        return None

    monkeypatch.setattr(planning_mod, "advance", no_plan)

    async def counted(engine: Any, job: Job, status: JobStatus | None, now: float) -> bool:
        judged.append(job.id)
        return await real(engine, job, status, now)

    monkeypatch.setattr(engine_mod, "judge", counted)

    async def one_pass(engine: Engine) -> list[int]:
        judged.clear()
        engine.poll_clock.last = -1e9       # the scheduler is asked on every pass here
        engine.tail_clocks.clear()          # and every log is due
        await engine.step()
        return list(judged)

    async with _engine(tmp_path) as (engine, scheduler):
        logs = await _seed(engine.store, tmp_path / "logs", 5, lines=2)
        ids = [j.id for j in await engine.store.active.jobs()]
        assert sorted(await one_pass(engine)) == ids           # RUNNING recorded on each
        assert {j.scheduler_state for j in await engine.store.active.jobs()} == {"RUNNING"}
        assert await one_pass(engine) == []                     # nothing changed
        assert await one_pass(engine) == []

        ended = await engine.store.jobs.get(ids[1])
        assert ended.backend_id is not None
        with logs[1].open("a") as f:
            f.writelines(line + "\n" for line in summary_lines(
                ended.backend_id, ended.job_name, "llama2-70b", ["bn0001"], 60.0, 0, None))
        scheduler.states[ended.backend_id] = SchedulerState.COMPLETED
        assert await one_pass(engine) == [ids[1]]
        assert (await engine.store.jobs.get(ids[1])).state not in JOB_ACTIVE   # concluded
        assert await one_pass(engine) == []

        silent = await engine.store.jobs.get(ids[3])
        await engine.store.jobs.update(silent.id, last_output_at=time.time() - 10 * LIMIT
                                       - engine.hang_limit())
        assert await one_pass(engine) == [ids[3]]
        assert (await engine.store.jobs.get(ids[3])).state == JobState.HUNG
        assert scheduler.cancelled == [silent.backend_id]


class _Untouchable:
    """An engine judge may read the hang limit of and nothing else: any other use (a
    store write or read, a wake-up, a mark, a cancel, the log follower) fails the test."""

    def hang_limit(self) -> float:
        return LIMIT

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"judge used engine.{name}")


def _job(state: JobState, scheduler_state: str | None, last_output_at: float | None,
         log_path: str | None, log_identity: str | None, summary_status: str | None,
         backend_id: str | None) -> Job:
    return Job(id=1, run_id=1, sweep_id=1, attempt=1, token="t", job_name="j", nodes="bn1",
               backend_id=backend_id, log_path=log_path, state=state,
               scheduler_state=scheduler_state, submitted_at=NOW - 3000, ended_at=None,
               log_offset=0, log_identity=log_identity, last_output_at=last_output_at,
               phase="training", last_step=3, profiler=0, mem_used_gb=None,
               mem_limit_gb=None, summary_status=summary_status, summary_exit=None,
               node_map_json=None, tgs=None, mfu=None, failure_class=None, failure_node=None,
               failure_line=None, failure_detail=None, submit_deadline=None)


STATUSES: list[JobStatus | None] = [
    None, JobStatus(SchedulerState.PENDING), JobStatus(SchedulerState.PENDING, reason="Resources"),
    JobStatus(SchedulerState.PENDING, reason="ReqNodeNotAvail, UnavailableNodes:bn1"),
    JobStatus(SchedulerState.RUNNING), JobStatus(SchedulerState.COMPLETING),
    JobStatus(SchedulerState.COMPLETED), JobStatus(SchedulerState.FAILED),
    JobStatus(SchedulerState.GONE)]
CASES = list(itertools.product(
    (JobState.QUEUED, JobState.RUNNING, JobState.HUNG),
    (None, "PENDING", "RUNNING", "COMPLETING", "COMPLETED", "GONE"),  # stored scheduler state
    (None, NOW - 5, NOW - LIMIT + 1, NOW - LIMIT, NOW - 10 * LIMIT),   # last output
    (None, "/logs/j.log"), (None, "ino:1:2", LOST + "ino:1:2"),  # log path, identity
    (None, "done"), (None, "77"),                                 # summary, backend id
    STATUSES))


async def test_nothing_to_judge_holds_only_where_judge_does_nothing() -> None:
    """Over every combination of a job's state, stored scheduler state, silence, log,
    summary and backend id, and the scheduler's word: wherever `nothing_to_judge` is true,
    `judge` returns False having used nothing of the engine but its hang limit."""
    skipped = 0
    for state, stored, output, path, identity, summary, backend_id, status in CASES:
        job = _job(state, stored, output, path, identity, summary, backend_id)
        if not nothing_to_judge(job, status, NOW, LIMIT):
            continue
        skipped += 1
        assert await judge(cast(Any, _Untouchable()), job, status, NOW) is False, job
    # The predicate is not vacuous: it holds for a good share of the states.
    assert len(CASES) / 10 < skipped < len(CASES)


@pytest.mark.parametrize(("job", "status", "skip"), [
    # A running job the scheduler said nothing about, silent less than the limit: skipped.
    (_job(JobState.RUNNING, "RUNNING", NOW - 5, "/l", "ino:1", None, "7"), None, True),
    # ... or said RUNNING again, as stored: skipped.
    (_job(JobState.RUNNING, "RUNNING", NOW - 5, "/l", "ino:1", None, "7"),
     JobStatus(SchedulerState.RUNNING), True),
    # Silent for the limit exactly: it is hung, judged.
    (_job(JobState.RUNNING, "RUNNING", NOW - LIMIT, "/l", "ino:1", None, "7"), None, False),
    # A new word from the scheduler is recorded: judged.
    (_job(JobState.RUNNING, "PENDING", NOW - 5, "/l", "ino:1", None, "7"),
     JobStatus(SchedulerState.RUNNING), False),
    # An end: judged, even one already stored.
    (_job(JobState.RUNNING, "COMPLETED", NOW - 5, "/l", "ino:1", None, "7"),
     JobStatus(SchedulerState.COMPLETED), False),
    # Queued with output in its log: it runs, judged; queued, pending, no output: skipped.
    (_job(JobState.QUEUED, "PENDING", NOW - 5, "/l", "ino:1", None, "7"), None, False),
    (_job(JobState.QUEUED, "PENDING", None, "/l", None, None, "7"),
     JobStatus(SchedulerState.PENDING, reason="Resources"), True),
    # Queued on nodes the scheduler calls unavailable: the queued check runs.
    (_job(JobState.QUEUED, "PENDING", None, "/l", None, None, "7"),
     JobStatus(SchedulerState.PENDING, reason="ReqNodeNotAvail"), False),
])
def test_nothing_to_judge_on_the_cases_that_matter(job: Job, status: JobStatus | None,
                                                   skip: bool) -> None:
    assert nothing_to_judge(job, status, NOW, LIMIT) is skip
