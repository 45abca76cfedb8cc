"""The Telegram delivery worker: the outbox, in order, through python-telegram-bot's `Bot`.

Each message's chunks are planned (stored) before the first send and confirmed one by one,
so a restart resends exactly the unconfirmed ones. Flood control (`RetryAfter`) waits as
told; network errors, time-outs and 5xx back off; a chunk Telegram cannot parse goes again
as plain text; a chunk refused for good is recorded and skipped. Nothing here raises into
the daemon: a failed notification never blocks or fails a sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, ChatMigrated, NetworkError, RetryAfter, TelegramError

from sweepd.notify import format as fmt
from sweepd.notify.bot import DEFAULT_TIMING, Backoff, Timing, describe, retry_after_s, send_text
from sweepd.notify.secrets import Token
from sweepd.store.outbox import Chunk, Item, Outbox

log = structlog.get_logger("sweepd.notify")


ChatsOf = Callable[[int], Awaitable[Sequence[int]]]


class ReportSource(Protocol):
    """What the final message needs from the service (sweepd.app.service.Service fits)."""

    async def report(self, sweep_id: int) -> dict[str, Any]: ...

    async def plot(self, sweep_id: int) -> bytes | None: ...


def stop_buttons(sweep_id: int, stop_event: int) -> InlineKeyboardMarkup:
    """Resume names the stop it answers: pressed under an older stop message, it must not
    resume a later, different stop."""
    return InlineKeyboardMarkup([[
        InlineKeyboardButton("Resume", callback_data=f"resume:{sweep_id}:{stop_event}"),
        InlineKeyboardButton("Abort", callback_data=f"abort:{sweep_id}"),
    ]])


class TelegramNotifier:
    def __init__(self, outbox: Outbox, bot: Bot, token: Token, chat_id: int,
                 reports: ReportSource, *, routine_per_hour: int | None = 2,
                 timing: Timing = DEFAULT_TIMING, limit: int = fmt.LIMIT,
                 news: Callable[[], asyncio.Event] | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 chats_of: ChatsOf | None = None) -> None:
        self.outbox = outbox
        self.bot = bot
        self.token = token
        self.chat_id = chat_id
        self.reports = reports
        self.routine_per_hour = routine_per_hour
        self.timing = timing
        self.limit = limit
        self._news = news
        self._clock = clock
        self._sleep = sleep
        self._backoff = Backoff(timing)
        self._chats_of = chats_of

    async def _chats(self, sweep_id: int) -> list[int]:
        """The sweep's chats (its spec's `chats`, else the default chat)."""
        chats = list(await self._chats_of(sweep_id)) if self._chats_of else []
        return chats or [self.chat_id]

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until stopped. Survives every error: it logs, waits, and tries again."""
        while not stop.is_set():
            news = self._news() if self._news else None
            try:
                await self.deliver_pending()
            except Exception as e:  # a notifier bug must not stop sweeps
                log.error("notify.pass_failed", error=describe(e, self.token))
                await self._sleep(self._backoff.next())
                continue
            waits = [asyncio.ensure_future(stop.wait())]
            if news is not None:
                waits.append(asyncio.ensure_future(news.wait()))
            try:
                await asyncio.wait(waits, timeout=self.timing.idle_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    async def deliver_pending(self) -> int:
        """Everything deliverable now, in order; returns the number of messages finished."""
        done = 0
        while True:
            items = await self.outbox.pending()
            if not items:
                break
            for item in items:
                await self._deliver(item)
                done += 1
        # Held routine lines go as one digest per sweep once the hourly budget allows.
        for sweep_id in sorted({h.sweep_id for h in await self.outbox.held()}):
            if not await self._routine_allowed():
                break
            await self._flush_digest(sweep_id)
            done += 1
        return done

    async def _routine_allowed(self) -> bool:
        sent = await self.outbox.routine_sent_since(self._clock() - 3600)
        return fmt.routine_allowed(sent, self.routine_per_hour)

    async def _flush_digest(self, sweep_id: int) -> None:
        held = await self.outbox.held(sweep_id)
        if held:
            body = fmt.digest_text([h.text for h in held])
            await self._deliver(await self.outbox.make_digest(sweep_id, body, held,
                                                              self._clock()))

    async def _deliver(self, item: Item) -> None:
        chats = await self._chats(item.sweep_id)
        chunks = await self.outbox.chunks(item)
        if not chunks:
            planned = await self._plan(item, len(chats))
            if planned is None:
                return  # held for a digest
            chunks = planned
        for c in chunks:
            if c.delivered_at is None:
                await self._send_chunk(item, c, chat_of(c, chats, self.chat_id))

    async def _plan(self, item: Item, chats: int = 1) -> list[Chunk] | None:
        """The message's chunks, once per chat: chat i's are chunks i*n+1 .. i*n+n, each
        confirmed on its own, so a restart resends to exactly the chats that missed it."""
        if item.kind == "digest":
            return await self.outbox.plan(item, fmt.parts(item.text, fmt.Klass.ROUTINE,
                                                          limit=self.limit) * chats,
                                          routine=True)
        occasion = await self.outbox.occasion(item.id)
        klass = fmt.classify(item.text, occasion.ends_sweep)
        if klass == fmt.Klass.ROUTINE and occasion.by_person:
            klass = fmt.Klass.POSITIVE   # the answer to a person's own action: at once
        if klass == fmt.Klass.ROUTINE and not await self._routine_allowed():
            await self.outbox.hold(item.id)
            return None
        if klass != fmt.Klass.ROUTINE:
            # Held lines go first, so the person reads them in the order they happened.
            await self._flush_digest(item.sweep_id)
        report: str | None = None
        photo = False
        if klass == fmt.Klass.FINAL:
            try:
                report = str((await self.reports.report(item.sweep_id))["markdown"])
                photo = await self.reports.plot(item.sweep_id) is not None
            except Exception as e:  # send the verdict line without the report
                log.warning("notify.report_failed", sweep=item.sweep_id,
                            error=describe(e, self.token))
        parts = fmt.parts(item.text, klass, report, photo, self.limit)
        return await self.outbox.plan(item, parts * chats, routine=klass == fmt.Klass.ROUTINE)

    async def _send_chunk(self, item: Item, c: Chunk, chat_id: int) -> None:
        while True:
            try:
                message_id = await self._transport(item, c, chat_id)
            except RetryAfter as e:
                delay = min(retry_after_s(e), self.timing.retry_after_max_s)
                await self._failed(item, c, e, delay)
            except BadRequest as e:
                # Not the parse mode (that fell back already): this chunk can never go.
                log.error("notify.refused", sweep=item.sweep_id, item=item.kind, id=item.id,
                          chunk=c.chunk, error=describe(e, self.token))
                await self.outbox.abandon(c.row_id, describe(e, self.token), self._clock())
                return
            except ChatMigrated as e:
                log.error("notify.chat_migrated", new_chat=e.new_chat_id)
                await self._failed(item, c, e, self._backoff.next())
            except (NetworkError, TelegramError) as e:  # network, time-out, 5xx, 401/403
                await self._failed(item, c, e, self._backoff.next())
            else:
                self._backoff.reset()
                await _finish(self.outbox.delivered(c.row_id, message_id, self._clock()))
                return

    async def _failed(self, item: Item, c: Chunk, error: Exception, delay: float) -> None:
        text = describe(error, self.token)
        log.warning("notify.retry", sweep=item.sweep_id, item=item.kind, id=item.id,
                    chunk=c.chunk, error=text, delay_s=delay)
        await self.outbox.attempt_failed(c.row_id, text)
        await self._sleep(delay)

    async def _transport(self, item: Item, c: Chunk, chat_id: int) -> int:
        await self.bot.initialize()  # idempotent; fails (and is retried) while the API is down
        if c.kind == "photo":
            png = await self.reports.plot(item.sweep_id)
            if png is None:
                raise BadRequest("plot no longer available")
            msg = await self.bot.send_photo(chat_id, png, caption=c.text or None)
            return msg.message_id
        markup = stop_buttons(item.sweep_id, item.id) if c.buttons else None
        return await send_text(self.bot, chat_id, c.text, c.parse_mode, markup)


def chat_of(c: Chunk, chats: Sequence[int], default: int) -> int:
    """Which chat a planned chunk goes to: the plan holds `of` chunks, an equal share per
    chat in the sweep's chat order. A plan from before a chat change: the default chat."""
    per_chat = c.of // len(chats) if chats and c.of % len(chats) == 0 else 0
    index = (c.chunk - 1) // per_chat if per_chat else 0
    return chats[index] if per_chat and index < len(chats) else default


async def _finish(confirm: Awaitable[None]) -> None:
    """Record a confirmed send even if the worker is cancelled at this moment: the message
    is out, and a restart must not send it again."""
    task = asyncio.ensure_future(confirm)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise
