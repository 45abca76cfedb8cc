"""The kept active jobs: every job in an active state, read whole once and then
only the rows written since (a pass over thousands of jobs reads few rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.core.states import JOB_ACTIVE
from sweepd.store.base import StoreBase
from sweepd.store.rows import Job

# Rows per `WHERE id IN (...)` read (well under SQLite's limit on bound parameters).
_IDS_PER_QUERY = 500


class ActiveJobs(StoreBase):
    """The active jobs, kept between passes."""

    async def active_jobs(self) -> list[Job]:
        """Every job in an active state, by id. Read whole once; after that only the rows
        written since through this store (and, after another connection's commit, whole
        again): with thousands of jobs followed, rebuilding every row on every pass cost
        more than reading the logs."""
        version = int((await self._all("PRAGMA data_version"))[0][0])
        if self._active is None or version != self._data_version:
            self._stale_jobs.clear()
            wanted = [str(s) for s in JOB_ACTIVE]
            marks = ",".join("?" * len(wanted))
            rows = await self._all(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id",
                                   wanted)
            self._active = {job.id: job for job in _jobs(rows)}
            self._data_version = version
        elif self._stale_jobs:
            # Taken before the reads: a write meanwhile marks its row for the next call.
            stale, self._stale_jobs = sorted(self._stale_jobs), set()
            fresh = {job.id: job for job in await self._jobs_by_ids(stale)}
            for job_id in stale:
                job = fresh.get(job_id)
                if job is not None and job.state in JOB_ACTIVE:
                    self._active[job_id] = job
                else:
                    self._active.pop(job_id, None)
            self._active = dict(sorted(self._active.items()))
        return list(self._active.values())

    async def _jobs_by_ids(self, ids: Sequence[int]) -> list[Job]:
        out: list[Job] = []
        for i in range(0, len(ids), _IDS_PER_QUERY):
            part = ids[i:i + _IDS_PER_QUERY]
            rows = await self._all(f"SELECT * FROM jobs WHERE id IN ({','.join('?' * len(part))})"
                                   " ORDER BY id", part)
            out += _jobs(rows)
        return out


def _jobs(rows: Sequence[Any]) -> list[Job]:
    """`Job.from_row` of every row, without the dataclass's `__init__` (a frozen one sets
    each of its 40-odd fields through `object.__setattr__`; the rows have no checks there):
    a restart reads 10,000 active rows before its first pass can begin."""
    if not rows:
        return []
    keys = rows[0].keys()   # columns and fields are the same set (test_migrations)
    out = []
    for row in rows:
        job = object.__new__(Job)
        object.__setattr__(job, "__dict__", dict(zip(keys, row, strict=True)))
        out.append(job)
    return out
