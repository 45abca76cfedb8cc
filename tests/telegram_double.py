"""A local HTTP double of the Telegram Bot API (aiohttp on 127.0.0.1), for the real
python-telegram-bot client pointed at it with `base_url`.

It records every call, keeps what was delivered (only requests it answered with success),
serves queued updates to getUpdates, and can be told to fail: answer 500, 429 with
`retry_after`, hang past the client's time-out, reject a parse mode, or be down.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from sweepd.app.service import Service
from sweepd.clusters.factory import make_backend
from sweepd.config import load_config
from sweepd.core.engine import Engine
from sweepd.notify.bot import Timing
from sweepd.notify.secrets import Token
from sweepd.store.store import Store

TOKEN = "123456:TEST-token-abcdefghijklmnopqrstuvwxyz"
CHAT = 4242
STRANGER = 6666
SPEC: dict[str, Any] = {"kind": "model-perf", "model": "llama2-70b",
                        "nodes": "chi[2832,2863,2867-2868,2870,2872,2880-2881]"}
# Delays small enough for tests; the client gives up on a hung request after 0.4 s.
# A connect to the local double only waits when the machine is crowded (a CI run at -n 4 on
# 2 cores timed out at 0.4 s), so it gets room; a read stays short because hang faults wait it out.
FAST = Timing(backoff_initial_s=0.01, backoff_max_s=0.05, idle_s=0.05, connect_timeout_s=5.0,
              read_timeout_s=1.0)
DELIVERING = frozenset({"sendMessage", "sendPhoto"})


@dataclass
class Sent:
    method: str
    chat_id: int
    text: str
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    message_id: int


@dataclass
class Fault:
    kind: str               # "500" | "429" | "hang" | "400" | "ok" (answered as usual)
    retry_after: int = 0
    methods: frozenset[str] = DELIVERING


@dataclass
class BotApiDouble:
    token: str = TOKEN
    hang_s: float = 3.0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    faults: deque[Fault] = field(default_factory=deque)
    reject_parse_mode: bool = False
    hangs_begun: int = 0    # hung requests so far: a test can act while one is in flight
    port: int = 0
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _news: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    # -- lifecycle: `stop()` then `start()` again is "down for a while" on the same port --

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if not self.port:
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- what tests do ---------------------------------------------------------------------

    def fail(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def queue_message(self, chat_id: int, text: str, user_id: int | None = None) -> int:
        uid = next(self._update_ids)
        self._updates.append({"update_id": uid, "message": {
            "message_id": next(self._message_ids), "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": {"id": user_id or chat_id, "is_bot": False, "first_name": "Person"},
            "text": text}})
        self._news.set()
        return uid

    def queue_button(self, chat_id: int, message_id: int, data: str) -> int:
        uid = next(self._update_ids)
        self._updates.append({"update_id": uid, "callback_query": {
            "id": f"cq{uid}", "chat_instance": "ci", "data": data,
            "from": {"id": chat_id, "is_bot": False, "first_name": "Person"},
            "message": {"message_id": message_id, "date": int(time.time()),
                        "chat": {"id": chat_id, "type": "private"}, "text": "stop"}}})
        self._news.set()
        return uid

    def methods(self, name: str) -> list[dict[str, Any]]:
        return [params for method, params in self.calls if method == name]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [s.text for s in self.sent if chat_id is None or s.chat_id == chat_id]

    # -- the API ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        form = await request.post()
        params: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
        if "photo" in form:
            params["photo"] = "<file>"
        self.calls.append((method, params))
        fault = self._fault_for(method)
        if fault is not None:
            if fault.kind == "hang":
                self.hangs_begun += 1
                await asyncio.sleep(self.hang_s)  # the client gives up first; never delivered
                return _error(504, "Gateway Timeout")
            if fault.kind == "429":
                return _error(429, f"Too Many Requests: retry after {fault.retry_after}",
                              {"retry_after": fault.retry_after})
            if fault.kind == "400":
                return _error(400, "Bad Request: chat not found")
            return _error(500, "Internal Server Error")
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result: Any = await handler(params)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, "result": result})

    def _fault_for(self, method: str) -> Fault | None:
        if self.faults and method in self.faults[0].methods:
            fault = self.faults.popleft()
            return None if fault.kind == "ok" else fault
        return None

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {"id": 123456, "is_bot": True, "first_name": "sweepd", "username": "sweepd_bot"}

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        if self.reject_parse_mode and params.get("parse_mode"):
            return _error(400, "Bad Request: can't parse entities: can't find end of the "
                               "entity starting at byte offset 12")
        return self._deliver("sendMessage", params, params["text"])

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        return self._deliver("sendPhoto", params, params.get("caption", ""))

    def _deliver(self, method: str, params: dict[str, Any], text: str) -> Any:
        chat_id = int(params["chat_id"])
        message_id = next(self._message_ids)
        markup = json.loads(params["reply_markup"]) if params.get("reply_markup") else None
        self.sent.append(Sent(method, chat_id, text, params.get("parse_mode"), markup,
                              message_id))
        return {"message_id": message_id, "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private"}, "text": text}

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), 1.0)  # keep tests fast
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            fresh = [u for u in self._updates if u["update_id"] >= offset]
            remaining = deadline - asyncio.get_running_loop().time()
            if fresh or remaining <= 0:
                return fresh
            self._news.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), remaining)

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        return True


def _error(status: int, description: str,
           parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)


@contextlib.asynccontextmanager
async def running_double() -> AsyncIterator[BotApiDouble]:
    double = BotApiDouble()
    await double.start()
    try:
        yield double
    finally:
        await double.stop()


@contextlib.asynccontextmanager
async def service_over(tmp_path: Path) -> AsyncIterator[Service]:
    """A real store, engine (sim backend, never stepped) and service."""
    config = load_config(None, {"daemon.state_dir": str(tmp_path)})
    store = await Store.open(tmp_path / "sweepd.db")
    backend, clock = make_backend(config)
    try:
        yield Service(Engine(store, backend, clock, config))
    finally:
        await backend.close()
        await store.close()


def token() -> Token:
    return Token(TOKEN)


class Sleeps:
    """A sleep that records what was asked and waits only a moment."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(0.01)


async def until(check: Callable[[], bool | Awaitable[bool]]) -> None:
    """Wait for a condition; 10 s is a test's deadline, not a timing assertion."""
    async with asyncio.timeout(10):
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            await asyncio.sleep(0.02)
