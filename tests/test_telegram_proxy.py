"""`telegram.proxy`: login nodes often reach api.telegram.org only through an HTTP proxy.
The Bot API double stands in for the proxy: the bot's base URL names a host that does not
resolve (`.invalid`), so a message the double receives came through the proxy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from telegram.request import HTTPXRequest

from sweepd.app.service import Service
from sweepd.config import ConfigError, TelegramConfig, load_config
from sweepd.core.states import SweepState
from sweepd.notify import build_workers
from sweepd.notify.bot import make_bot
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.telegram_double import CHAT, FAST, SPEC, TOKEN, BotApiDouble, token, until

UNREACHABLE = "http://api.telegram.invalid/bot"


def proxy_of(request: object) -> object:
    assert isinstance(request, HTTPXRequest)
    # What PTB hands httpx for the client it builds: the one place the proxy is kept.
    return request._client_kwargs.get("proxy")


async def test_the_proxy_reaches_both_requests_and_messages_go_through_it(
        double: BotApiDouble) -> None:
    proxy = f"http://127.0.0.1:{double.port}"
    bot = make_bot(token(), UNREACHABLE, FAST, proxy=proxy)
    try:
        updates, sends = bot._request
        assert proxy_of(sends) == proxy and proxy_of(updates) == proxy
        await bot.initialize()
        await bot.send_message(CHAT, "through the proxy")
    finally:
        await bot.shutdown()
    assert double.texts(CHAT) == ["through the proxy"]
    # No proxy: none given to httpx (which then honours HTTPS_PROXY itself).
    assert proxy_of(make_bot(token(), UNREACHABLE, FAST).request) is None


async def test_the_daemon_workers_send_through_the_configured_proxy(
        service: Service, double: BotApiDouble) -> None:
    config = TelegramConfig(enabled=True, token_file=None, chat_ids=[CHAT],
                            base_url=UNREACHABLE, proxy=f"http://127.0.0.1:{double.port}",
                            backoff_initial_s=0.01, backoff_max_s=0.05, idle_s=0.05)
    sid = int((await service.submit(SPEC))["id"])
    await service.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await service.store.events.add(sid, "progress", "a line for the chat")
    workers = build_workers(config, service.store, service, env={"TG_BOT_TOKEN": TOKEN})
    stop = asyncio.Event()
    notify = dict(workers.runners)["notify"]
    task = asyncio.create_task(notify(stop))
    try:
        await until(lambda: "a line for the chat" in double.texts(CHAT))
    finally:
        stop.set()
        await task
        await workers.close()


def test_a_malformed_proxy_is_refused_at_load_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "sweepd.toml"
    refusals: dict[str, str] = {}
    for bad in ["proxy.example.org:3128", "ftp://proxy.example.org:21", "http://:3128",
                "http://proxy.example.org:99999", "http://proxy.example.org:3128/path"]:
        path.write_text(f'[telegram]\nproxy = "{bad}"\n')
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert "\n" not in str(caught.value), bad
        refusals[bad] = scrubbed(str(caught.value), tmp=tmp_path)
    check_golden_cases(GOLDEN / "telegram_proxy" / "malformed_proxy.txt", refusals)


def test_a_good_proxy_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "sweepd.toml"
    path.write_text('[telegram]\nproxy = "http://proxy.example.org:3128"\n')
    assert load_config(path).telegram.proxy == "http://proxy.example.org:3128"
    assert load_config(None).telegram.proxy is None
