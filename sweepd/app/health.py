"""The daemon's own health for `/health` and `status`: when it started, whether its first
(recovery) pass has ended, its last engine pass, its version, and whether the scheduler
answers."""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from typing import Any

from sweepd.clusters.base import ControllerUnreachable
from sweepd.core.engine import Engine
from sweepd.store.outbox import Outbox

PROBE_TIMEOUT_S = 10.0


def version() -> str:
    try:
        return importlib.metadata.version("sweepd")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


async def backend_reachable(engine: Engine) -> tuple[bool, str | None]:
    """Ask the scheduler about one (made-up) node: any answer means it is reachable."""
    try:
        await asyncio.wait_for(engine.backend.node_states(["sweepd-status-probe"]),
                               PROBE_TIMEOUT_S)
    except (ControllerUnreachable, TimeoutError) as e:
        return False, str(e) or f"no answer within {PROBE_TIMEOUT_S:g}s"
    except (RuntimeError, OSError) as e:
        return True, f"answered with an error: {e}"
    return True, None


class DaemonHealth:
    """What `/health` and `status` say of the daemon itself (the service holds one)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.started_at = time.time()
        self.last_pass_at: float | None = None
        # False until the daemon's first (recovery) pass has ended: the socket answers during
        # it, and /health says which (a client that needs the recovered state waits for True).
        self.recovered = False

    def engine_pass(self) -> None:
        """Called after each engine pass (the daemon's loop): `status` shows the last."""
        self.last_pass_at = time.time()

    async def status(self) -> dict[str, Any]:
        config = self.engine.config
        store = self.engine.store
        reachable, why = await backend_reachable(self.engine)
        return {
            "version": version(), "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 1),
            "backend": config.cluster.backend, "backend_reachable": reachable,
            "backend_problem": why,
            "sweeps": await store.base.count_by_state("sweeps"),
            "jobs": await store.base.count_by_state("jobs"),
            "telegram": config.telegram.enabled,
            "delivery_backlog": len(await Outbox(store).pending(limit=10_000)),
            "last_pass_at": self.last_pass_at,
            "last_pass_ago_s": (None if self.last_pass_at is None
                                else round(time.time() - self.last_pass_at, 1)),
        }
