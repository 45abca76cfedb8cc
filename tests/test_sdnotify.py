"""sd_notify through a datagram socket of the test's own: READY=1 after recovery, WATCHDOG=1
at half of WATCHDOG_USEC from the main loop, STOPPING=1; and the daemon driving it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweepd.api.server import FRONT
from sweepd.app.daemon import serve
from sweepd.config import load_config
from sweepd.util.sdnotify import SdNotify


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def messages(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except BlockingIOError:
        return out
    finally:
        sock.settimeout(5)


def test_ready_watchdog_stopping(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    now = [100.0]
    sd = SdNotify({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"}, clock=lambda: now[0])
    assert sd.watchdog_interval == 2.0
    assert sd.ready()
    assert sd.beat()
    now[0] += 1.0
    assert not sd.beat()  # within half the watchdog period: no second ping
    now[0] += 1.5
    assert sd.beat()
    assert sd.stopping()
    # Each datagram's assignments (sd_notify: one `NAME=value` a line).
    assert [dict(line.split("=", 1) for line in m.splitlines()) for m in messages(sock)] == [
        {"READY": "1", "STATUS": "recovered; serving"}, {"WATCHDOG": "1"}, {"WATCHDOG": "1"},
        {"STOPPING": "1"}]


def test_abstract_socket_name() -> None:
    name = f"sweepd-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert SdNotify({"NOTIFY_SOCKET": "@" + name}).stopping()
        assert sock.recv(100) == b"STOPPING=1"


def test_without_systemd_everything_is_a_no_op() -> None:
    sd = SdNotify({})
    assert not sd.enabled and sd.watchdog_interval is None
    assert not sd.ready() and not sd.beat() and not sd.stopping()


def test_watchdog_for_another_pid_is_not_ours(listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    sd = SdNotify({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert sd.watchdog_interval is None


async def test_daemon_says_ready_pings_and_says_stopping(
        tmp_path: Path, listener: tuple[socket.socket, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sock, path = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # ping every 0.05 s of main-loop passes
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "daemon.socket": str(tmp_path / "sweepd.sock"),
                                "daemon.tick_s": 0.1})
    stop = asyncio.Event()
    ready = asyncio.Event()
    daemon = asyncio.create_task(serve(config, stop, ready.set, front=FRONT))
    await asyncio.wait_for(ready.wait(), 20)
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, sock.recv, 4096)
    assert first.startswith(b"READY=1")
    second = await loop.run_in_executor(None, sock.recv, 4096)
    assert second == b"WATCHDOG=1"
    stop.set()
    assert await asyncio.wait_for(daemon, 20) == 0
    assert messages(sock)[-1] == "STOPPING=1"


def test_systemd_accepts_the_unit_file() -> None:
    unit = Path(__file__).parent.parent / "deploy" / "systemd" / "sweepd.service"
    text = unit.read_text()
    for line in ("Type=notify", "StateDirectory=sweepd", "RuntimeDirectory=sweepd",
                 "ConfigurationDirectory=sweepd", "User=sweepd", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "PrivateTmp=yes"):
        assert f"\n{line}\n" in text, line
    assert "\nWatchdogSec=" in text
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "sweepd.service" not in done.stderr, done.stderr  # no warnings about our unit
