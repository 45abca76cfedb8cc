"""What concluding a job and controlling a sweep need from the engine: its parts and its
queues, not the engine itself (so `conclude`, `control` and `node_check` do not import it)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from sweepd.clusters.base import ClusterBackend
from sweepd.config import Config
from sweepd.core.gathered import Gathered
from sweepd.kinds.spec import SweepSpec
from sweepd.store.rows import Sweep
from sweepd.store.store import Store
from sweepd.util.clock import Clock


class EngineParts(Protocol):
    store: Store
    backend: ClusterBackend
    clock: Clock
    config: Config
    gathered: Gathered   # submissions' gathers, kept for each sweep's first plan

    @property
    def outputs(self) -> Path:
        """Where each sweep's job logs and checkouts go (`sweep-<id>` under it)."""

    def spec_of(self, sweep: Sweep) -> SweepSpec:
        """The sweep's spec as it was accepted, parsed once."""

    def cancel_later(self, backend_id: str) -> None:
        """Queue a scancel for after the deciding transaction commits."""

    async def flush_cancels(self) -> None:
        """Send the queued scancels."""

    def mark(self, sweep_id: int) -> None:
        """Plan this sweep on the next pass."""

    def notify(self) -> None:
        """Something changed: wake the engine loop and the clients waiting for news."""
