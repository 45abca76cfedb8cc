"""Without Telegram: every outgoing message goes to the structured log, through the same
outbox (so turning Telegram on later does not replay what the log already carried)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from sweepd.store.outbox import Outbox, Part

log = structlog.get_logger("sweepd.notify")


class LogSink:
    def __init__(self, outbox: Outbox, news: Callable[[], asyncio.Event] | None = None,
                 idle_s: float = 30.0, clock: Callable[[], float] = time.time) -> None:
        self.outbox = outbox
        self._news = news
        self._idle_s = idle_s
        self._clock = clock

    async def deliver_pending(self) -> int:
        done = 0
        while items := await self.outbox.pending():
            for item in items:
                chunks = await self.outbox.chunks(item) or await self.outbox.plan(
                    item, [Part("text", item.text)], routine=False)
                for c in chunks:
                    if c.delivered_at is None:
                        log.info("notify.message", sweep=item.sweep_id, text=c.text)
                        await self.outbox.delivered(c.row_id, None, self._clock())
                done += 1
        return done

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            news = self._news() if self._news else None
            try:
                await self.deliver_pending()
            except Exception as e:  # logging messages must not stop sweeps
                log.error("notify.log_sink_failed", error=repr(e))
            waits = [asyncio.ensure_future(stop.wait())]
            if news is not None:
                waits.append(asyncio.ensure_future(news.wait()))
            try:
                await asyncio.wait(waits, timeout=self._idle_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
