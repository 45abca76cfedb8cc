"""The store's frequent questions read only the rows they are about: the engine's every-pass
question for retries that are due, and model perf's every-plan question for the latest param
memory on a sweep's nodes, each answered over its partial index (schema version 12), and
right."""

from __future__ import annotations

import re
from typing import Any

from sweepd.core.states import RunState, SweepState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store


def _indexes(plan: str) -> list[str]:
    """The indexes a query plan searches with (SQLite's `USING [COVERING] INDEX name`)."""
    return re.findall(r"USING (?:COVERING )?INDEX (\w+)", plan)


async def _plans(store: Store, ask: Any) -> list[str]:
    """What SQLite did for each statement `ask()` ran: its query plans, joined."""
    conn = store.base._conn
    ran: list[str] = []
    await conn.set_trace_callback(ran.append)
    try:
        await ask()
    finally:
        await conn.set_trace_callback(None)
    plans = []
    for sql in ran:
        async with conn.execute(f"EXPLAIN QUERY PLAN {sql}") as cur:
            plans.append(" | ".join(str(r[3]) for r in await cur.fetchall()))
    return plans


async def _sweep(store: Store, model: str, runs: int) -> list[int]:
    sweep = await store.sweeps.create("model-perf", model, {"kind": "model-perf",
                                                              "model": model})
    await store.sweeps.transition(sweep, SweepState.RUNNING, "started")
    ids = []
    for i in range(runs):
        run = await store.runs.add(sweep, f"b{i}", RunParams(), "n[1-2]", "planned")
        ids.append(run.id)
    return ids


async def test_due_retries_read_only_the_runs_given_a_retry_time(store: Store) -> None:
    waiting = await _sweep(store, "a", 3)
    later = await _sweep(store, "b", 2)
    await _sweep(store, "c", 5)   # no retry time: never read
    await store.runs.set_not_before(waiting[1], 100.0)
    await store.runs.set_not_before(later[0], 300.0)
    assert await store.runs.sweeps_with_due_retries(200.0) == {1}
    assert await store.runs.sweeps_with_due_retries(400.0) == {1, 2}
    await store.runs.transition(waiting[1], RunState.ACTIVE, "submitted")
    await store.runs.transition(waiting[1], RunState.PASSED, "ended", outcome="pass")
    assert await store.runs.sweeps_with_due_retries(400.0) == {2}   # ended: not due
    plans = await _plans(store, lambda: store.runs.sweeps_with_due_retries(400.0))
    assert len(plans) == 1 and _indexes(plans[0]) == ["runs_with_retry_time"], plans


async def test_latest_param_memory_walks_only_the_jobs_on_those_nodes(store: Store) -> None:
    mine, other = await _sweep(store, "llama2-70b", 2), await _sweep(store, "grok-1", 1)
    for run_id, nodes, gb in ((mine[0], "n[1-2]", 40.0), (mine[1], "n[1-4]", 41.0),
                              (other[0], "n[1-2]", 42.0)):
        job = await store.jobs.create(await store.runs.get(run_id), f"t{run_id}", "j", nodes)
        await store.jobs.update(job.id, mem_used_gb=gb)
    await store.jobs.create(await store.runs.get(mine[0]), "none", "j", "n[1-2]")  # no line
    assert await store.jobs.latest_mem_used_of_model("n[1-2]", "llama2-70b") == 40.0
    assert await store.jobs.latest_mem_used_of_model("n[1-4]", "llama2-70b") == 41.0
    assert await store.jobs.latest_mem_used_of_model("n[1-2]", "grok-1") == 42.0
    assert await store.jobs.latest_mem_used_of_model("n[1-8]", "llama2-70b") is None
    plans = await _plans(store,
                         lambda: store.jobs.latest_mem_used_of_model("n[1-2]", "llama2-70b"))
    assert len(plans) == 1 and _indexes(plans[0]) == ["jobs_with_memory_by_nodes"], plans
