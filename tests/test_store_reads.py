"""Reads on the shared connection never see another task's open transaction: what a
`watch` or the API is handed is committed, never taken back by a rollback."""

from __future__ import annotations

import asyncio

import pytest

from sweepd.store.store import Store


async def test_a_read_waits_for_another_tasks_transaction_and_sees_no_rolled_back_row(
        store: Store) -> None:
    sweep_id = await store.sweeps.create("model-perf", "t", {"model": "llama2-70b"})
    before = [e.id for e in await store.events.of_sweep(sweep_id)]
    written, finish = asyncio.Event(), asyncio.Event()

    async def decide_then_fail() -> None:
        async with store.tx():
            await store.events.add(sweep_id, "progress", "a decision that will not hold")
            written.set()
            await finish.wait()
            raise RuntimeError("rolled back")

    writer = asyncio.create_task(decide_then_fail())
    await written.wait()
    reader = asyncio.create_task(store.events.of_sweep(sweep_id))
    for _ in range(20):           # the reader cannot finish while the transaction is open
        await asyncio.sleep(0)
    assert not reader.done()
    finish.set()
    with pytest.raises(RuntimeError):
        await writer
    assert [e.id for e in await reader] == before
    # The writing task itself reads its own writes inside its transaction.
    async with store.tx():
        await store.events.add(sweep_id, "progress", "kept")
        assert [e.reason for e in await store.events.of_sweep(sweep_id)][-1] == "kept"



async def test_last_at_is_the_time_of_the_sweeps_latest_event(store: Store) -> None:
    """`events.last_at` (was `last_event_at`): the latest event's own time, of this sweep
    only; None for a sweep without events."""
    first = await store.sweeps.create("model-perf", "a", {})
    await store.events.add(first, "progress", "later")
    other = await store.sweeps.create("model-perf", "b", {})
    async with store.tx() as conn:   # distinct times, the latest event's the newest
        await conn.execute("UPDATE events SET at = '2001-01-01T00:00:00.000Z' "
                           "WHERE sweep_id = ?", (first,))
        await conn.execute("UPDATE events SET at = '2002-01-01T00:00:00.000Z' WHERE id = "
                           "(SELECT max(id) FROM events WHERE sweep_id = ?)", (first,))
        await conn.execute("UPDATE events SET at = '2003-01-01T00:00:00.000Z' "
                           "WHERE sweep_id = ?", (other,))
    assert await store.events.last_at(first) == "2002-01-01T00:00:00.000Z"
    assert await store.events.last_at(other) == "2003-01-01T00:00:00.000Z"
    assert await store.events.last_at(other + 1) is None
