"""Fixtures shared by the Telegram tests: the Bot API double and a service over a fresh store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sweepd.app.service import Service
from tests.telegram_double import BotApiDouble, running_double, service_over


@pytest.fixture
async def double() -> AsyncIterator[BotApiDouble]:
    async with running_double() as d:
        yield d


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with service_over(tmp_path) as s:
        yield s
