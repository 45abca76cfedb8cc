"""Outgoing messages (the outbox worker: Telegram, or the structured log) and chat control."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sweepd.config import TelegramConfig
from sweepd.notify.bot import Timing, make_bot
from sweepd.notify.chat import ChatControl, Operations
from sweepd.notify.chats import sweep_chats
from sweepd.notify.logsink import LogSink
from sweepd.notify.secrets import (
    Credentials,
    SecretError,
    install_redaction,
    load_credentials,
)
from sweepd.notify.telegram import ReportSource, TelegramNotifier
from sweepd.store.outbox import Outbox
from sweepd.store.store import Store

Runner = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


class ServiceLike(ReportSource, Operations, Protocol):
    pass


@dataclass
class Workers:
    """Named long-running workers for the daemon to supervise, and their clean-up."""

    runners: list[tuple[str, Runner]]
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # The chats messages may go to (a spec's `chats` must be among them); none without
    # Telegram.
    chat_ids: tuple[int, ...] = ()

    async def close(self) -> None:
        for closer in reversed(self._closers):
            await closer()


def timing_of(config: TelegramConfig) -> Timing:
    return Timing(backoff_initial_s=config.backoff_initial_s,
                  backoff_max_s=config.backoff_max_s, idle_s=config.idle_s,
                  connect_timeout_s=config.connect_timeout_s,
                  read_timeout_s=config.read_timeout_s)


def chat_credentials(config: TelegramConfig, env: Mapping[str, str] | None = None
                     ) -> tuple[Credentials, list[int]]:
    """The token and the chats (config's first, then the environment's and the file's).
    Raises SecretError (a ConfigError) when either is missing or the file is unsafe: read
    before a start writes anything."""
    creds = load_credentials(os.environ if env is None else env, config.token_file)
    chat_ids = list(dict.fromkeys([*config.chat_ids, *creds.chat_ids]))
    if not chat_ids:
        raise SecretError("Telegram is enabled but no chat id: set telegram.chat_ids, "
                          "TG_CHAT_ID, or a ChatID line in the token file")
    return creds, chat_ids


def build_workers(config: TelegramConfig, store: Store, service: ServiceLike,
                  news: Callable[[], asyncio.Event] | None = None,
                  env: Mapping[str, str] | None = None) -> Workers:
    """Telegram delivery and chat control when enabled, else the log sink. Raises
    SecretError (a ConfigError) when Telegram is enabled without a usable token."""
    outbox = Outbox(store)
    if not config.enabled:
        return Workers([("notify", LogSink(outbox, news, config.idle_s).run)])
    creds, chat_ids = chat_credentials(config, env)
    undo = install_redaction(creds.token)
    timing = timing_of(config)
    bot = make_bot(creds.token, config.base_url, timing, config.poll_timeout_s, config.proxy)
    async def chats_of(sweep_id: int) -> list[int]:
        return sweep_chats((await store.sweeps.get(sweep_id)).spec, chat_ids)

    notifier = TelegramNotifier(outbox, bot, creds.token, chat_ids[0], service,
                                routine_per_hour=config.routine_per_hour, timing=timing,
                                news=news, chats_of=chats_of)
    chat = ChatControl(outbox, bot, creds.token, chat_ids, service,
                       poll_timeout_s=config.poll_timeout_s, timing=timing)

    async def close() -> None:
        try:
            await bot.shutdown()
        finally:
            undo()

    return Workers([("notify", notifier.run), ("chat", chat.run)], [close], tuple(chat_ids))
