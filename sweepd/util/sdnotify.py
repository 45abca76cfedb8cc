"""systemd's sd_notify protocol: datagrams to $NOTIFY_SOCKET (no libsystemd needed).

READY=1 once recovery is done, WATCHDOG=1 from the main loop at half of WATCHDOG_USEC,
STOPPING=1 on the way out. Without $NOTIFY_SOCKET (not under systemd) all are no-ops.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping

import structlog

log = structlog.get_logger("sweepd.util.sdnotify")


class SdNotify:
    def __init__(self, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        env = os.environ if env is None else env
        path = env.get("NOTIFY_SOCKET", "")
        # A leading '@' names an abstract socket.
        self._address = "\0" + path[1:] if path.startswith("@") else path
        self._clock = clock
        self._last_ping: float | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        watched = usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid()))
        self.watchdog_interval: float | None = int(usec) / 2e6 if watched else None

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, message: str) -> bool:
        if not self._address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(message.encode(), self._address)
        except OSError as e:
            # Losing a notification must not take the daemon down; systemd will notice.
            log.warning("sdnotify.failed", message=message, error=e.strerror)
            return False
        return True

    def ready(self, status: str = "recovered; serving") -> bool:
        return self.send(f"READY=1\nSTATUS={status}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def beat(self) -> bool:
        """Called from the main loop each pass: pings at most once per half watchdog period,
        so a stuck loop stops the pings and systemd restarts the daemon."""
        if self.watchdog_interval is None or not self._address:
            return False
        now = self._clock()
        if self._last_ping is not None and now - self._last_ping < self.watchdog_interval:
            return False
        self._last_ping = now
        return self.send("WATCHDOG=1")
