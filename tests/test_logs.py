"""The daemon's log lines: JSON for journald (JOURNAL_STREAM, or stderr not a terminal),
readable lines in a terminal. A real `sweepd serve` on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from sweepd.util.logs import wants_json
from tests.daemon_proc import write_config
from tests.simrun import write_scenario


def serve_on_a_terminal(tmp_path: Path, env: dict[str, str]) -> str:
    """Start `sweepd serve` with stderr on a pty; return what it wrote up to `daemon.ready`."""
    config = write_config(tmp_path, write_scenario(tmp_path))
    primary, secondary = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "serve", "--config", str(config)],
                            stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                            env={**env, "PYTHONUNBUFFERED": "1"})
    os.close(secondary)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"daemon.ready" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen.decode()
            if select.select([primary], [], [], 0.5)[0]:
                seen += os.read(primary, 65536)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.close(primary)
    return seen.decode().replace("\r\n", "\n")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    return {**env, **extra}


def test_readable_lines_in_a_terminal(tmp_path: Path) -> None:
    out = serve_on_a_terminal(tmp_path, _env())
    ready = next(line for line in out.splitlines() if "daemon.ready" in line)
    assert not ready.lstrip().startswith("{")
    assert "[info" in ready and "socket=" in ready   # ConsoleRenderer's key=value pairs


def test_json_under_systemd_even_on_a_terminal(tmp_path: Path) -> None:
    out = serve_on_a_terminal(tmp_path, _env(JOURNAL_STREAM="8:12345"))
    ready = next(line for line in out.splitlines() if "daemon.ready" in line)
    record = json.loads(ready)
    assert record["event"] == "daemon.ready" and record["level"] == "info"


def test_json_when_stderr_is_a_file(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as f:
        assert wants_json({}, f)
    primary, secondary = os.openpty()
    try:
        with os.fdopen(secondary, "w", closefd=False) as tty:
            assert not wants_json({}, tty)
            assert wants_json({"JOURNAL_STREAM": "8:1"}, tty)
    finally:
        os.close(primary)
        os.close(secondary)


def test_daemon_log_file_is_json(tmp_path: Path) -> None:
    from tests.daemon_proc import Daemon

    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        daemon.start()
        assert daemon.stop() == 0
    finally:
        daemon.kill()
    lines = [json.loads(line) for line in daemon.log.read_text().splitlines() if line.strip()]
    assert {"daemon.ready", "daemon.stopped"} <= {r["event"] for r in lines}
