"""Structured logging: JSON lines for journald, readable lines in a terminal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TextIO

import structlog


def wants_json(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> bool:
    """JSON under systemd (it sets JOURNAL_STREAM when stderr goes to the journal) and
    whenever stderr is not a terminal (a file, a pipe, a collector); readable in a terminal."""
    env = os.environ if env is None else env
    stream = sys.stderr if stream is None else stream
    if env.get("JOURNAL_STREAM"):
        return True
    try:
        return not stream.isatty()
    except ValueError:   # a closed stream: nobody reads it, keep the machine format
        return True


def _current_stderr(*_: object) -> structlog.PrintLogger:
    """A logger on `sys.stderr` as it is now, not as it was when logging was configured
    (a replaced stream, e.g. one a test captured and closed, is never written to)."""
    return structlog.PrintLogger(sys.stderr)


def configure(level: str = "info", json: bool | None = None) -> None:
    """`json=None`: decide by where stderr goes (`wants_json`)."""
    if json is None:
        json = wants_json()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=_current_stderr,
        cache_logger_on_first_use=False,
    )
