"""Per-sweep chats: a spec names the chats its messages go to (each one the daemon allows);
without it they go to the first configured chat. The real python-telegram-bot client
against the local Bot API double, wired as the daemon wires it (`build_workers`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sweepd.app.service import Service
from sweepd.cli.client import ClientError
from sweepd.config import TelegramConfig
from sweepd.core.metrics import exposition
from sweepd.core.states import SweepState
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.notify import Workers, build_workers
from tests.daemon_proc import Daemon, write_config
from tests.simrun import write_scenario
from tests.telegram_double import CHAT, SPEC, STRANGER, TOKEN, BotApiDouble, Fault, until

TEAM = -100777   # a group chat: negative ids are ordinary in Telegram


def config(double: BotApiDouble) -> TelegramConfig:
    return TelegramConfig(enabled=True, token_file=None, chat_ids=[CHAT, TEAM],
                          base_url=double.base_url, routine_per_hour=None, poll_timeout_s=0,
                          backoff_initial_s=0.01, backoff_max_s=0.05, idle_s=0.05,
                          connect_timeout_s=5.0, read_timeout_s=1.0)


@pytest.fixture
async def workers(service: Service, double: BotApiDouble) -> AsyncIterator[Workers]:
    built = build_workers(config(double), service.store, service, service.engine.news,
                          env={"TG_BOT_TOKEN": TOKEN})
    service.allowed_chats = frozenset(built.chat_ids)   # as the daemon does
    yield built
    await built.close()


async def delivering(workers: Workers, double: BotApiDouble, texts: list[str]) -> None:
    """Run the delivery worker until every text has gone somewhere."""
    stop = asyncio.Event()
    notify = dict(workers.runners)["notify"]
    task = asyncio.create_task(notify(stop))
    try:
        await until(lambda: all(t in double.texts() for t in texts))
    finally:
        stop.set()
        await task


async def sweep_saying(service: Service, text: str, **spec: Any) -> int:
    sid = int((await service.submit({**SPEC, **spec}))["id"])
    await service.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await service.store.events.add(sid, "progress", text)
    return sid


async def test_each_sweep_speaks_in_its_own_chats(service: Service, double: BotApiDouble,
                                                  workers: Workers) -> None:
    assert workers.chat_ids == (CHAT, TEAM)
    await sweep_saying(service, "team only", chats=[TEAM])
    await sweep_saying(service, "default chat")
    both = await sweep_saying(service, "both chats", chats=[TEAM, CHAT])
    await delivering(workers, double, ["team only", "default chat", "both chats"])
    assert [t for t in double.texts(TEAM) if "chat" in t or "team" in t] == [
        "team only", "both chats"]
    assert [t for t in double.texts(CHAT) if "chat" in t or "team" in t] == [
        "default chat", "both chats"]
    # Each chat's copy is confirmed on its own (so a restart resends only what is missing).
    rows = await service.store.base.rows(
        "SELECT d.chunk, d.of, d.message_id FROM deliveries d JOIN events e"
        " ON e.id = d.event_id WHERE e.sweep_id = ? AND e.reason = 'both chats'", (both,))
    assert [(r[0], r[1]) for r in rows] == [(1, 2), (2, 2)] and all(r[2] for r in rows)


async def test_a_failed_copy_is_resent_to_that_chat_only(service: Service,
                                                         double: BotApiDouble,
                                                         workers: Workers) -> None:
    sid = await sweep_saying(service, "to both", chats=[CHAT, TEAM])
    double.fail(Fault("500"))   # the first send (CHAT's copy) fails once, then goes
    await delivering(workers, double, ["to both"])
    await until(lambda: double.texts(TEAM).count("to both") == 1)
    assert double.texts(CHAT).count("to both") == 1
    # /metrics counts the failed attempt (read from the delivery rows).
    scraped = text_string_to_metric_families((await exposition(service.store, None)).decode())
    values = {s.name: s.value for f in scraped for s in f.samples}
    assert values["sweepd_delivery_failures_total"] == 1
    assert values["sweepd_delivery_refused_total"] == 0
    # The stop message's buttons reach the team chat too.
    await service.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "node fault",
                                                progress="[model-perf STOP] halted")
    await delivering(workers, double, ["[model-perf STOP] halted"])
    await until(lambda: len([s for s in double.sent if s.reply_markup]) == 2)
    assert {s.chat_id for s in double.sent if s.reply_markup} == {CHAT, TEAM}


async def test_a_chat_the_daemon_does_not_allow_is_refused(service: Service,
                                                           workers: Workers) -> None:
    with pytest.raises(SpecError) as refused:
        await service.submit({**SPEC, "chats": [TEAM, STRANGER]})
    assert refused.value.errors[0]["loc"] == ["chats"]
    assert str(STRANGER) in str(refused.value) and "allowed" in str(refused.value)
    assert await service.list_sweeps() == []   # nothing recorded
    service.allowed_chats = frozenset()          # Telegram off
    with pytest.raises(SpecError, match=r"telegram\.enabled"):
        await service.submit({**SPEC, "chats": [CHAT]})
    service.allowed_chats = None                 # `sweepd run`: no chat at all
    assert (await service.submit({**SPEC, "chats": [CHAT]}))["id"] == 1


@pytest.mark.parametrize(("chats", "why"), [
    ([], "at least 1"), ([CHAT, CHAT], "named twice"), (["4242"], "integer"),
    (CHAT, "list"),
])
def test_chats_must_be_a_list_of_distinct_chat_ids(chats: Any, why: str) -> None:
    with pytest.raises(SpecError, match=why):
        parse_spec({**SPEC, "chats": chats})


async def test_the_daemon_routes_and_refuses_by_its_configured_chats(
        tmp_path: Path, double: BotApiDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `sweepd serve` with Telegram on (the double): a sweep naming the team chat
    speaks there; one naming a stranger is refused over the socket."""
    monkeypatch.setenv("TG_BOT_TOKEN", TOKEN)
    extra = (f'\n[telegram]\nenabled = true\ntoken_file = "{tmp_path / "none"}"\n'
             f'chat_ids = [{CHAT}, {TEAM}]\nbase_url = "{double.base_url}"\n'
             "poll_timeout_s = 0\nidle_s = 0.05\nbackoff_max_s = 0.1\n")
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path), extra))
    try:
        client = await asyncio.to_thread(daemon.start)
        with pytest.raises(ClientError) as refused:
            await asyncio.to_thread(client.submit, {**SPEC, "chats": [STRANGER]})
        assert refused.value.status == 422 and refused.value.details[0]["loc"] == ["chats"]
        sid = (await asyncio.to_thread(client.submit, {**SPEC, "chats": [TEAM],
                                                       "values": [8]}))["id"]
        await until(lambda: any(f"sweep {sid}" in t or "submitted" in t
                                for t in double.texts(TEAM)))
        assert double.texts(TEAM) and not double.texts(CHAT)
    finally:
        daemon.kill()
