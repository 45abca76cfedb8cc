"""The python-telegram-bot client the delivery worker and chat control share: the bot
built with its time-outs and proxy, the delays and the backoff between tries, one text sent
with the plain-text fallback, and an error told without the token.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from datetime import timedelta

import structlog
from telegram import Bot, InlineKeyboardMarkup
from telegram.error import BadRequest, RetryAfter
from telegram.request import HTTPXRequest

from sweepd.notify import format as fmt
from sweepd.notify.secrets import REDACTED, Token

log = structlog.get_logger("sweepd.notify")

# Opt in to PTB 22's timedelta time periods: without it PTB warns (deprecation) whenever it
# builds a RetryAfter, which is exactly when flood control needs handling.
os.environ.setdefault("PTB_TIMEDELTA", "true")

DEFAULT_BASE_URL = "https://api.telegram.org/bot"


@dataclass(frozen=True)
class Timing:
    """Delays, configurable so tests need no real waiting."""

    backoff_initial_s: float = 1.0
    backoff_max_s: float = 300.0
    retry_after_max_s: float = 3600.0
    idle_s: float = 30.0          # re-check the outbox this often without news
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 20.0


DEFAULT_TIMING = Timing()


def make_bot(token: Token, base_url: str = DEFAULT_BASE_URL, timing: Timing = DEFAULT_TIMING,
             poll_timeout_s: float = 0.0, proxy: str | None = None) -> Bot:
    """A real PTB bot; `base_url` points it at a local double in tests. `proxy`
    (`telegram.proxy`): both the sends and the long poll go through it; None leaves httpx
    to HTTPS_PROXY from the environment, else a direct connection."""
    request = HTTPXRequest(connect_timeout=timing.connect_timeout_s,
                           read_timeout=timing.read_timeout_s,
                           write_timeout=timing.read_timeout_s, pool_timeout=timing.read_timeout_s,
                           proxy=proxy)
    updates = HTTPXRequest(connect_timeout=timing.connect_timeout_s,
                           read_timeout=poll_timeout_s + timing.read_timeout_s,
                           write_timeout=timing.read_timeout_s, pool_timeout=timing.read_timeout_s,
                           proxy=proxy)
    return Bot(token.value, base_url=base_url, request=request, get_updates_request=updates)


def retry_after_s(error: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 deprecates the int form; take either
        warnings.simplefilter("ignore")
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def is_parse_error(error: BadRequest) -> bool:
    return "can't parse entities" in error.message.lower()


def describe(error: BaseException, token: Token) -> str:
    return f"{type(error).__name__}: {error}".replace(token.value, REDACTED)


class Backoff:
    def __init__(self, timing: Timing) -> None:
        self._timing = timing
        self._next = timing.backoff_initial_s

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self._timing.backoff_max_s)
        return delay

    def reset(self) -> None:
        self._next = self._timing.backoff_initial_s


async def send_text(bot: Bot, chat_id: int, text: str, parse_mode: str | None,
                    markup: InlineKeyboardMarkup | None = None) -> int:
    """One sendMessage; a chunk refused for its parse mode goes again as plain text."""
    try:
        msg = await bot.send_message(chat_id, text, parse_mode=parse_mode, reply_markup=markup,
                                     disable_web_page_preview=True)
    except BadRequest as e:
        if parse_mode is None or not is_parse_error(e):
            raise
        log.info("notify.plain_fallback", chat=chat_id, error=e.message)
        msg = await bot.send_message(chat_id, fmt.plain(text), reply_markup=markup,
                                     disable_web_page_preview=True)
    return msg.message_id
