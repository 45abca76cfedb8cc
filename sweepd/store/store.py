"""The only code that runs SQL, one module per table (sweeps, runs, jobs, the kept active
jobs, events, exclusions, the kinds' job facts, campaigns, the daemon's own state) over
`base` (the one aiosqlite connection, its explicit write transactions, the guarded
transitions, the event row); `Store` owns the base and holds one object per table.

Every state change is a guarded UPDATE (`WHERE state IN (allowed sources)`) plus an event
row, in one transaction. Zero rows changed raises InvalidTransition.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Self

import aiosqlite

from sweepd.store.active import ActiveJobs
from sweepd.store.base import InvalidTransition, NotFound, StoreBase
from sweepd.store.campaigns import CampaignsTable
from sweepd.store.daemon_state import DaemonStateTable
from sweepd.store.events import EventsTable
from sweepd.store.exclusions import ExclusionsTable
from sweepd.store.facts import FactsTable
from sweepd.store.jobs import JobsTable, LogChunkLike
from sweepd.store.runs import RunsTable
from sweepd.store.sweeps import SweepsTable

__all__ = ["InvalidTransition", "LogChunkLike", "NotFound", "Store", "StoreBase"]


class Store:
    """What every caller holds: the tables as attributes (`store.jobs.transition(...)`),
    all on one connection. Its own methods are about the whole store: open, close, and the
    transaction a caller opens to make several tables' writes commit together."""

    def __init__(self, base: StoreBase) -> None:
        self.base = base
        self.sweeps = SweepsTable(base)
        self.campaigns = CampaignsTable(base, self.sweeps)
        self.runs = RunsTable(base)
        self.active = ActiveJobs(base)
        self.jobs = JobsTable(base, self.active)
        self.events = EventsTable(base)
        self.exclusions = ExclusionsTable(base)
        self.facts = FactsTable(base)
        self.daemon_state = DaemonStateTable(base)

    @classmethod
    async def open(cls, path: Path | str) -> Self:
        return cls(await StoreBase.open(path))

    @classmethod
    async def open_readonly(cls, path: Path | str) -> Self:
        """A store to read only (`--state-dir`): SQLite's read-only mode, no migration, so
        a daemon or `sweepd run` using the same file is never disturbed."""
        return cls(await StoreBase.open_readonly(path))

    async def close(self) -> None:
        await self.base.close()

    def tx(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        """One write transaction; the tables' writes inside it (in this task) join it, so
        they commit together or not at all (`StoreBase.tx`)."""
        return self.base.tx()
