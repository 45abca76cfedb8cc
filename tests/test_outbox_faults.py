"""Delivery under faults: 500s, 429 with retry_after, time-outs, the Bot API down for a
while, and the notifier killed mid-delivery. Afterwards every message went exactly once,
in order. Also the delivery migration."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiosqlite
import pytest

from sweepd.app.service import Service
from sweepd.core.states import SweepState
from sweepd.notify.bot import make_bot
from sweepd.notify.telegram import TelegramNotifier
from sweepd.store.migrate import _statements, latest_version, migrate, migrations
from sweepd.store.outbox import Outbox
from sweepd.store.store import Store
from tests.telegram_double import (
    CHAT,
    FAST,
    SPEC,
    BotApiDouble,
    Fault,
    Sleeps,
    token,
    until,
)


@contextlib.asynccontextmanager
async def worker(service: Service, double: BotApiDouble,
                 sleep: Sleeps | None = None) -> AsyncIterator[asyncio.Task[None]]:
    """A notifier task with its own bot (a fresh process, as after a restart)."""
    bot = make_bot(token(), double.base_url, FAST)
    notifier = TelegramNotifier(Outbox(service.store), bot, token(), CHAT, service,
                                routine_per_hour=None, timing=FAST, sleep=sleep or Sleeps(),
                                news=service.engine.news)
    stop = asyncio.Event()
    task = asyncio.create_task(notifier.run(stop))
    try:
        yield task
    finally:
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bot.shutdown()


async def lines(service: Service, n: int, start: int = 0) -> tuple[int, list[str]]:
    sid = int((await service.submit(SPEC))["id"]) if start == 0 else 1
    out = [f"run {i} (job {9800 + i}): FAILED — RETRY: rccl flake" for i in range(start, start + n)]
    for line in out:
        await service.store.events.add(sid, "progress", line)
    service.engine.notify()
    return sid, out


def all_sent(double: BotApiDouble, n: int) -> Callable[[], bool]:
    return lambda: len(double.sent) >= n


async def test_500s_then_success_deliver_each_once_in_order(service: Service,
                                                           double: BotApiDouble) -> None:
    double.fail(*[Fault("500")] * 3)
    _, expected = await lines(service, 4)
    async with worker(service, double):
        await until(all_sent(double, 4))
    assert double.texts() == expected
    assert len(double.methods("sendMessage")) == 4 + 3


async def test_429_waits_the_retry_after_it_was_given(service: Service,
                                                      double: BotApiDouble) -> None:
    double.fail(Fault("429", retry_after=7))
    _, expected = await lines(service, 2)
    sleeps = Sleeps()
    async with worker(service, double, sleeps):
        await until(all_sent(double, 2))
    assert 7.0 in sleeps.asked
    assert double.texts() == expected
    rows = await service.store.base.rows("SELECT attempts, last_error FROM deliveries ORDER BY id")
    assert rows[0]["attempts"] == 2 and "RetryAfter" in rows[0]["last_error"]


async def test_a_hung_request_times_out_and_is_retried(service: Service,
                                                       double: BotApiDouble) -> None:
    double.fail(Fault("hang"))
    _, expected = await lines(service, 2)
    async with worker(service, double):
        await until(all_sent(double, 2))
    assert double.texts() == expected
    rows = await service.store.base.rows("SELECT last_error FROM deliveries ORDER BY id")
    assert "TimedOut" in rows[0]["last_error"]


async def test_api_down_for_a_while_loses_and_doubles_nothing(service: Service,
                                                              double: BotApiDouble) -> None:
    _, first = await lines(service, 2)
    async with worker(service, double):
        await until(all_sent(double, 2))
        await double.stop()
        _, more = await lines(service, 3, start=2)
        rows_failed = await _wait_failed(service.store)
        assert rows_failed > 0
        # The sweep's own writes are not held up by the outage.
        await service.store.sweeps.transition(1, SweepState.RUNNING, "started",
                                                    progress="sweep 1 running")
        await double.start()  # back on the same port
        await until(all_sent(double, 6))
    assert double.texts() == [*first, *more, "sweep 1 running"]


async def _wait_failed(store: Store) -> int:
    async def failed() -> bool:
        rows = await store.base.rows("SELECT count(*) FROM deliveries WHERE last_error IS NOT NULL")
        return int(rows[0][0]) > 0
    await until(failed)
    rows = await store.base.rows("SELECT count(*) FROM deliveries WHERE last_error IS NOT NULL")
    return int(rows[0][0])


async def test_killed_during_a_hung_send_resends_once_after_restart(
        service: Service, double: BotApiDouble) -> None:
    _, expected = await lines(service, 3)
    double.hang_s = 5.0
    # The first send goes through; every later attempt hangs, so the worker is killed
    # while a send is in flight however slow the machine (a retry that got through would
    # be a delivery the killed worker may not have recorded: at-least-once, not this case).
    double.fail(Fault("ok"), *[Fault("hang")] * 50)
    async with worker(service, double):
        await until(lambda: double.hangs_begun >= 1)
        assert double.texts() == expected[:1]
    double.faults.clear()
    # The first notifier is gone (cancelled mid-send); a new one starts over the same DB.
    async with worker(service, double):
        await until(all_sent(double, 3))
    assert double.texts() == expected


async def test_killed_right_after_each_confirmation_never_sends_twice(
        service: Service, double: BotApiDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    _, expected = await lines(service, 5)
    current: list[asyncio.Task[None]] = []
    original = Outbox.delivered

    async def delivered_then_killed(self: Outbox, row_id: int, message_id: int | None,
                                    now: float) -> None:
        await original(self, row_id, message_id, now)
        current[-1].cancel()  # the worker dies as the confirmation commits

    monkeypatch.setattr(Outbox, "delivered", delivered_then_killed)
    for _ in range(5):
        async with worker(service, double) as task:
            current.append(task)
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert double.texts() == expected
    rows = await service.store.base.rows(
        "SELECT count(*) FROM deliveries WHERE delivered_at IS NULL")
    assert rows[0][0] == 0


async def test_a_chunk_refused_for_good_is_recorded_and_skipped(service: Service,
                                                                double: BotApiDouble) -> None:
    double.fail(Fault("400"))
    _, expected = await lines(service, 2)
    async with worker(service, double):
        await until(all_sent(double, 1))
    assert double.texts() == expected[1:]
    rows = await service.store.base.rows(
        "SELECT message_id, last_error FROM deliveries ORDER BY id")
    assert rows[0]["message_id"] is None and "chat not found" in rows[0]["last_error"].lower()


# -- the migration ------------------------------------------------------------------------


async def test_upgrade_to_v2_does_not_queue_the_history(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    conn.row_factory = aiosqlite.Row
    v1 = migrations()[0]
    await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for statement in _statements(v1.sql):
        await conn.execute(statement)
    await conn.execute("INSERT INTO schema_version VALUES (1)")
    await conn.execute("INSERT INTO sweeps (kind, name, spec_json) VALUES ('x', 'x', '{}')")
    for _ in range(3):
        await conn.execute("INSERT INTO events (sweep_id, kind, reason) VALUES (1, 'progress',"
                           " 'old news')")
    assert await migrate(conn) == latest_version() >= 2
    await conn.close()
    store = await Store.open(tmp_path / "db")
    try:
        outbox = Outbox(store)
        assert await outbox.pending() == []
        await store.events.add(1, "progress", "new")
        assert [i.text for i in await outbox.pending()] == ["new"]
        columns = {r[1] for r in await store.base.rows("PRAGMA table_info(deliveries)")}
        assert {"event_id", "chunk", "of", "message_id", "delivered_at", "attempts",
                "last_error"} <= columns
        assert await store.base.rows("SELECT * FROM daemon_state WHERE key = 'outbox.after_event'")
    finally:
        await store.close()
