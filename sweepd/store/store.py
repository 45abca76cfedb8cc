"""The only code that runs SQL, one module per table (sweeps, runs, jobs, the kept active
jobs, events, exclusions, the kinds' job facts, campaigns) over `base` (the one aiosqlite
connection, its explicit write transactions, the guarded transitions); `Store` joins them
for every caller.

Every state change is a guarded UPDATE (`WHERE state IN (allowed sources)`) plus an event
row, in one transaction. Zero rows changed raises InvalidTransition.
"""

from __future__ import annotations

from sweepd.store.active import ActiveJobs
from sweepd.store.base import InvalidTransition, NotFound, StoreBase
from sweepd.store.campaigns import CampaignsTable
from sweepd.store.events import EventsTable
from sweepd.store.exclusions import ExclusionsTable
from sweepd.store.facts import FactsTable
from sweepd.store.jobs import JobsTable, LogChunkLike
from sweepd.store.runs import RunsTable
from sweepd.store.sweeps import SweepsTable

__all__ = ["InvalidTransition", "LogChunkLike", "NotFound", "Store", "StoreBase"]


class Store(CampaignsTable, SweepsTable, RunsTable, JobsTable, ActiveJobs, EventsTable,
            ExclusionsTable, FactsTable):
    """What every caller uses: all the tables on one connection."""
