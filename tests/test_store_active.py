"""`store.active.jobs()` is read whole once, then only the rows written since: a pass over
thousands of followed jobs builds no row that did not change. Every answer is the same as
a full read's, including after writes by another connection (another process)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import sweepd.store.active as active_mod
from sweepd.core.states import JobState, RunState
from sweepd.monitor.facts import Phase
from sweepd.store.rows import Job, RunParams
from sweepd.store.store import Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "sweepd.db")
    try:
        yield s
    finally:
        await s.close()


class _Chunk:
    def __init__(self, job_id: int, **fields: Any) -> None:
        self.job_id, self.fields = job_id, fields
        self.steps: list[dict[str, Any]] = []
        self.signals: list[dict[str, Any]] = []


async def _jobs(store: Store, count: int) -> list[int]:
    sweep = await store.sweeps.create("model-perf", "s", {"kind": "model-perf"})
    ids = []
    for j in range(count):
        run = await store.runs.add(sweep, f"r{j}", RunParams(), f"n{j}", "seeded")
        await store.runs.transition(run.id, RunState.ACTIVE, "seeded")
        job = await store.jobs.create(run, f"t{j}", f"job-{j}", f"n{j}")
        await store.jobs.transition(job.id, JobState.QUEUED, "seeded", backend_id=str(j),
                                        log_path=f"/logs/{j}.log")
        ids.append(job.id)
    return ids


async def _full_read(store: Store) -> list[Job]:
    rows = await store.base.rows("SELECT * FROM jobs WHERE state IN ('submitting', 'queued', "
                                 "'running', 'hung') ORDER BY id")
    return [Job.from_row(r) for r in rows]


async def test_only_rows_written_since_the_last_read_are_built_again(
        store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ids = await _jobs(store, 6)
    await store.active.jobs()
    built: list[int] = []
    real = active_mod._jobs

    def counting(rows: Sequence[Any]) -> list[Job]:
        built.extend(int(row["id"]) for row in rows)
        return real(rows)

    monkeypatch.setattr(active_mod, "_jobs", counting)

    # Nothing written: no row read or built.
    assert [j.id for j in await store.active.jobs()] == ids
    assert built == []

    # One job's state and another's fields: those two rows, nothing else.
    await store.jobs.transition(ids[1], JobState.RUNNING, "runs", last_output_at=5.0)
    await store.jobs.update(ids[4], scheduler_state="RUNNING")
    built.clear()
    got = await store.active.jobs()
    assert sorted(set(built)) == [ids[1], ids[4]]
    assert got == await _full_read(store)

    # A job that ended leaves; its row is the one read.
    await store.jobs.transition(ids[2], JobState.CANCELLED, "cancelled")
    built.clear()
    got = await store.active.jobs()
    assert built == [ids[2]] and ids[2] not in [j.id for j in got]
    assert got == await _full_read(store)

    # A pass's log facts (offsets, output time, phase, step) are applied as written:
    # no row read back, and the same as reading it.
    await store.jobs.record_logs([_Chunk(ids[0], log_offset=120, log_identity="1:2",
                                         last_output_at=7.5, phase=str(Phase.TRAINING),
                                         last_step=3)])
    built.clear()
    got = await store.active.jobs()
    assert built == []
    assert got == await _full_read(store)
    # Other facts (memory) are read back.
    await store.jobs.record_logs([_Chunk(ids[0], mem_used_gb=41.5, log_offset=200)])
    built.clear()
    got = await store.active.jobs()
    assert built == [ids[0]]
    assert got == await _full_read(store)

    # Another connection's commit (another process): everything is read again.
    other = sqlite3.connect(tmp_path / "sweepd.db")
    other.execute("UPDATE jobs SET phase = 'summary' WHERE id = ?", (ids[5],))
    other.commit()
    other.close()
    built.clear()
    got = await store.active.jobs()
    assert sorted(built) == [i for i in ids if i != ids[2]]
    assert [j.phase for j in got if j.id == ids[5]] == ["summary"]
    assert got == await _full_read(store)


async def test_a_rolled_back_write_leaves_the_rows_as_stored(store: Store) -> None:
    ids = await _jobs(store, 2)
    await store.active.jobs()
    with pytest.raises(RuntimeError):
        async with store.tx():
            await store.jobs.record_logs([_Chunk(ids[0], log_offset=99)])
            raise RuntimeError("the caller's transaction fails")
    assert [j.log_offset for j in await store.active.jobs()] == [0, 0]
