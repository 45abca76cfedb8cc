"""The bot token: where it comes from, and how it is kept out of every log.

Sources, first found wins: the environment (`TG_BOT_TOKEN`, `TG_CHAT_ID`), then a token
file readable only by the daemon's user. The file is either the bare token or the
toolkit's format (`BotToken <token>` and `ChatID <id>` lines).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from sweepd.config import ConfigError

REDACTED = "[REDACTED]"


class SecretError(ConfigError):
    """A token that cannot be used; the message never contains the token."""


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)

    def __repr__(self) -> str:
        return "Token(***)"

    __str__ = __repr__


@dataclass(frozen=True)
class Credentials:
    token: Token
    chat_ids: tuple[int, ...] = ()


def _chat_id(text: str, where: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise SecretError(f"{where}: chat id must be an integer") from None


def read_token_file(path: Path) -> Credentials:
    """Refuse a file others could read: a leaked bot token lets anyone post as the bot."""
    try:
        st = path.stat()
    except OSError as e:
        raise SecretError(f"cannot read token file {path}: {e.strerror}") from None
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise SecretError(
            f"token file {path} is readable by group or others (mode {mode:04o}); "
            f"run: chmod 600 {path}")
    if st.st_uid != os.geteuid():
        raise SecretError(f"token file {path} must be owned by the daemon's user "
                          f"(uid {os.geteuid()}), not uid {st.st_uid}")
    token = ""
    chats: list[int] = []
    for line in path.read_text("utf-8").splitlines():
        key, _, rest = line.strip().partition(" ")
        if not key or key.startswith("#"):
            continue
        if key == "BotToken":
            token = rest.strip()
        elif key == "ChatID":
            chats.append(_chat_id(rest, str(path)))
        elif not rest and not token:
            token = key  # a bare token on its own line
    if not token:
        raise SecretError(f"token file {path} holds no token (a bare token or a "
                          "'BotToken <token>' line)")
    return Credentials(Token(token), tuple(chats))


def load_credentials(env: Mapping[str, str], token_file: Path | None) -> Credentials:
    if env.get("TG_BOT_TOKEN"):
        chats = (_chat_id(env["TG_CHAT_ID"], "TG_CHAT_ID"),) if env.get("TG_CHAT_ID") else ()
        return Credentials(Token(env["TG_BOT_TOKEN"].strip()), chats)
    if token_file is None:
        raise SecretError("Telegram is enabled but no token: set TG_BOT_TOKEN or "
                          "telegram.token_file")
    return read_token_file(token_file)


def redact(value: Any, secret: str) -> Any:
    """The value with every occurrence of the secret replaced, through dicts and lists."""
    if isinstance(value, str):
        return value.replace(secret, REDACTED) if secret in value else value
    if isinstance(value, dict):
        return {k: redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, secret) for v in value)
    if isinstance(value, BaseException):
        text = repr(value)
        return text.replace(secret, REDACTED) if secret in text else value
    return value


class Redactor:
    """A structlog processor: the token never reaches a rendered log line."""

    def __init__(self, token: Token) -> None:
        self._secret = token.value

    def __call__(self, logger: Any, method: str, event: Any) -> Any:
        return redact(event, self._secret)


def install_redaction(token: Token) -> Callable[[], None]:
    """Redact the token from structlog (just before rendering) and from stdlib log records
    (httpx logs request URLs, which carry the token). Returns the undo."""
    config = structlog.get_config()
    old_processors = list(config["processors"])
    redactor = Redactor(token)
    processors = [*old_processors[:-1], redactor, *old_processors[-1:]]
    structlog.configure(processors=processors)

    old_factory = logging.getLogRecordFactory()
    secret = token.value

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = old_factory(*args, **kwargs)
        text = record.getMessage()
        if secret in text:
            record.msg, record.args = text.replace(secret, REDACTED), ()
        return record

    logging.setLogRecordFactory(factory)

    def undo() -> None:
        structlog.configure(processors=old_processors)
        logging.setLogRecordFactory(old_factory)

    return undo
