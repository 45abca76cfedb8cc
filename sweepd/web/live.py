"""The dashboard's live updates, kept apart from the engine: one feed per page being watched
(a sweep's, the index), each reading the store on its own timer and keeping its latest
rendering in memory; every browser watching it has a queue of one. A new rendering replaces
what a slow browser has not taken yet (it only ever needs the latest page), so a slow or
dead browser holds nothing but its own queue, and the engine's pass never waits on one.
A feed with no browser left stops reading."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger("sweepd.web")

STALE_S = 30.0   # a page unchanged in the store is rendered again this often (its clock)


class Feed:
    """One page's latest rendering and the browsers watching it."""

    def __init__(self, render: Callable[[], Awaitable[str]], refresh_s: float,
                 version: Callable[[], Awaitable[object]] | None = None) -> None:
        self._render = render
        # A cheap read (a few rows) that changes whenever the page would: the page is
        # rendered again only then, or after STALE_S (its elapsed time, its ETA).
        self._version = version
        self.refresh_s = refresh_s
        self.latest: str | None = None
        self._queues: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0   # renderings replaced before a slow browser took them

    @property
    def watchers(self) -> int:
        return len(self._queues)

    def subscribe(self) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        if self.latest is not None:
            queue.put_nowait(self.latest)
        self._queues.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="web.feed")
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        self._queues.discard(queue)
        if not self._queues and self._task is not None:
            self._task.cancel()
            self._task = None

    def publish(self, page: str) -> None:
        self.latest = page
        for queue in self._queues:
            if queue.full():   # the browser has not taken the last one: it is stale now
                queue.get_nowait()
                self.dropped += 1
            queue.put_nowait(page)

    async def _run(self) -> None:
        seen: object = None
        rendered_at: float | None = None
        loop = asyncio.get_running_loop()
        while self._queues:
            try:
                current = await self._version() if self._version is not None else None
                due = (rendered_at is None or current != seen or self._version is None
                       or loop.time() - rendered_at >= STALE_S)
                if due:
                    seen, rendered_at = current, loop.time()
                    page = await self._render()
                    if page != self.latest:
                        self.publish(page)
            except asyncio.CancelledError:
                raise
            except Exception as e:   # a read that failed (a sweep gone): tried again later
                log.warning("web.render_failed", error=repr(e))
            await asyncio.sleep(self.refresh_s)

    async def close(self) -> None:
        """Every browser's stream is told to end (an empty page), then reading stops."""
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait("")
        self._queues.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class Feeds:
    """The feeds by page key (`index`, `sweep:7`), made on first watch."""

    def __init__(self, refresh_s: float) -> None:
        self.refresh_s = refresh_s
        self._feeds: dict[str, Feed] = {}
        self._dropped_gone = 0   # what feeds no longer watched had dropped

    def get(self, key: str, render: Callable[[], Awaitable[str]],
            version: Callable[[], Awaitable[object]] | None = None) -> Feed:
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = Feed(render, self.refresh_s, version)
        return feed

    def drop_idle(self) -> None:
        for key in [k for k, f in self._feeds.items() if not f.watchers]:
            self._dropped_gone += self._feeds.pop(key).dropped

    @property
    def dropped(self) -> int:
        """Renderings replaced before a slow browser took them, over every feed."""
        return self._dropped_gone + sum(f.dropped for f in self._feeds.values())

    async def close(self) -> None:
        # A copy: each stream that ends drops its idle feed from the dict meanwhile.
        for feed in list(self._feeds.values()):
            await feed.close()
        self._feeds.clear()
