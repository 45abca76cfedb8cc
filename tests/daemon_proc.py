"""Run `sweepd serve` as a real subprocess for restart and crash tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from sweepd.cli.client import Client


def write_config(tmp_path: Path, scenario: Path, extra: str = "") -> Path:
    config = tmp_path / "sweepd.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "sweepd.sock"}"\n'
        f'tick_s = 0.1\n\n[cluster.sim]\nscenario = "{scenario}"\n{extra}'
    )
    return config


class Daemon:
    def __init__(self, tmp_path: Path, config: Path) -> None:
        self.socket = tmp_path / "sweepd.sock"
        self.config = config
        self.log = tmp_path / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.clients: list[Client] = []

    def start(self) -> Client:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sweepd", "serve", "--config", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        client = Client(self.socket)
        self.clients.append(client)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # Probe with a socket of our own (closed either way) until the daemon listens:
            # a failed connect through the HTTP client would leak its socket object.
            # The socket answers during the recovery pass: started means recovered.
            if self._listening() and client.health().get("recovered"):
                return client
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited: {self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"daemon did not start: {self.log.read_text()[-3000:]}")

    def start_detached(self) -> None:
        """Start again without waiting for the socket (recovery may be slow: a controller
        away, a submission in flight)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sweepd", "serve", "--config", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def _listening(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.socket))
            except OSError:
                return False
        return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        for client in self.clients:
            client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
