"""The daemon's own health for `status`: its version, and whether the scheduler answers."""

from __future__ import annotations

import asyncio
import importlib.metadata

from sweepd.clusters.base import ControllerUnreachable
from sweepd.core.engine import Engine

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
