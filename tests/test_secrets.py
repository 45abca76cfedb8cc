"""The bot token: file permission check, the toolkit's file format, and that the token
never reaches a log line (structlog or stdlib), an error, or the outbox."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from sweepd.core.states import SweepState
from sweepd.notify.bot import make_bot
from sweepd.notify.secrets import (
    REDACTED,
    Redactor,
    SecretError,
    Token,
    install_redaction,
    load_credentials,
    read_token_file,
)
from sweepd.notify.telegram import TelegramNotifier
from sweepd.store.outbox import Outbox
from tests.telegram_double import (
    CHAT,
    FAST,
    SPEC,
    TOKEN,
    Fault,
    Sleeps,
    running_double,
    service_over,
    token,
    until,
)


def write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_bare_token_file_with_mode_600_is_read(tmp_path: Path) -> None:
    creds = read_token_file(write(tmp_path / "t", f"{TOKEN}\n", 0o600))
    assert creds.token.value == TOKEN and creds.chat_ids == ()


def test_toolkit_format_gives_token_and_chat(tmp_path: Path) -> None:
    text = f"# sweepd bot\nBotToken {TOKEN}\nChatID -100200300\n"
    creds = read_token_file(write(tmp_path / "t", text, 0o400))
    assert creds.token.value == TOKEN and creds.chat_ids == (-100200300,)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_group_or_world_readable_token_file_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path / "t", f"BotToken {TOKEN}\n", mode)
    with pytest.raises(SecretError, match=r"readable by group or others.*chmod 600") as e:
        read_token_file(path)
    assert TOKEN not in str(e.value)


def test_a_file_without_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="holds no token"):
        read_token_file(write(tmp_path / "t", "ChatID 5\n", 0o600))


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "t", "BotToken other\n", 0o644)  # would be refused if read
    creds = load_credentials({"TG_BOT_TOKEN": TOKEN, "TG_CHAT_ID": "42"}, path)
    assert creds.token.value == TOKEN and creds.chat_ids == (42,)
    assert TOKEN not in repr(creds) and TOKEN not in str(creds.token)


def test_redactor_processor_and_stdlib_records(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor(Token(TOKEN))
    event = redactor(None, "info", {"event": "x", "url": f"https://api/bot{TOKEN}/getMe",
                                    "nested": [{"t": TOKEN}]})
    assert event == {"event": "x", "url": f"https://api/bot{REDACTED}/getMe",
                     "nested": [{"t": REDACTED}]}
    undo = install_redaction(Token(TOKEN))
    try:
        assert any(isinstance(p, Redactor) for p in structlog.get_config()["processors"])
        with caplog.at_level(logging.DEBUG):
            logging.getLogger("httpx").info("HTTP Request: POST %s", f"https://x/bot{TOKEN}/m")
        assert "HTTP Request: POST https://x/bot[REDACTED]/m" in caplog.text
        assert TOKEN not in caplog.text
    finally:
        undo()
    assert not any(isinstance(p, Redactor) for p in structlog.get_config()["processors"])


async def test_token_never_reaches_a_log_or_the_outbox_under_faults(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with service_over(tmp_path) as service, running_double() as double:
        sid = int((await service.submit(SPEC))["id"])
        await service.store.sweeps.transition(sid, SweepState.RUNNING, "started",
                                                    progress="running")
        double.fail(Fault("500"), Fault("429", retry_after=1), Fault("hang"), Fault("400"))
        await service.store.events.add(sid, "progress", "second")
        bot = make_bot(token(), double.base_url, FAST)
        notifier = TelegramNotifier(Outbox(service.store), bot, token(), CHAT, service,
                                    timing=FAST, sleep=Sleeps(), routine_per_hour=None)
        undo = install_redaction(token())
        stop = asyncio.Event()
        try:
            with capture_logs() as logs, caplog.at_level(logging.DEBUG):
                task = asyncio.create_task(notifier.run(stop))
                await until(lambda: len(double.sent) >= 1)
                await double.stop()  # connection errors too
                await service.store.events.add(sid, "progress", "third")
                service.engine.notify()
                await until(lambda: any(e["event"] == "notify.retry" and "NetworkError"
                                        in e["error"] for e in logs))
                stop.set()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        finally:
            undo()
            await bot.shutdown()
        assert any(e["event"] == "notify.retry" for e in logs)
        assert TOKEN not in repr(logs)
        assert TOKEN not in caplog.text
        rows = await service.store.base.rows("SELECT last_error FROM deliveries")
        assert TOKEN not in repr([tuple(r) for r in rows])
