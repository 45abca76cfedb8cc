"""The one clock. Policy durations are in cluster seconds; a simulated cluster runs them
faster by `scale` (0.01 = 100x), so the same rules hold in tests and on a real cluster."""

from __future__ import annotations

import asyncio
import time


class Clock:
    def __init__(self, scale: float = 1.0) -> None:
        if scale <= 0:
            raise ValueError("clock scale must be positive")
        self.scale = scale

    def now(self) -> float:
        """Cluster seconds since the epoch (wall time stretched by 1/scale): survives restarts."""
        return time.time() / self.scale

    def wall(self, cluster_seconds: float) -> float:
        return cluster_seconds * self.scale

    async def sleep(self, cluster_seconds: float, stop: asyncio.Event | None = None) -> bool:
        """Sleep, or return True early when `stop` is set."""
        timeout = max(0.0, self.wall(cluster_seconds))
        if stop is None:
            await asyncio.sleep(timeout)
            return False
        try:
            await asyncio.wait_for(stop.wait(), timeout)
        except TimeoutError:
            return False
        return True
