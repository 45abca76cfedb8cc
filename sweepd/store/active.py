"""The kept active jobs: every job in an active state, read whole once and then
only the rows written since (a pass over thousands of jobs reads few rows)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sweepd.store.base import StoreBase
from sweepd.store.rows import Job
from sweepd.store.states import JOB_ACTIVE

# Rows per `WHERE id IN (...)` read (well under SQLite's limit on bound parameters).
_IDS_PER_QUERY = 500


class ActiveJobs:
    """The active jobs, kept between passes."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base
        # The active jobs as last read, by id, kept between passes: a pass re-reads only
        # the rows this connection wrote since (the base's marks), and all of them when
        # another connection committed (`PRAGMA data_version` moved).
        self._active: dict[int, Job] | None = None
        self._data_version: int | None = None

    async def jobs(self) -> list[Job]:
        """Every job in an active state, by id. Read whole once; after that only the rows
        written since through this store (and, after another connection's commit, whole
        again): with thousands of jobs followed, rebuilding every row on every pass cost
        more than reading the logs."""
        version = int((await self._base.rows("PRAGMA data_version"))[0][0])
        if self._active is None or version != self._data_version:
            self._base.take_written()
            wanted = [str(s) for s in JOB_ACTIVE]
            marks = ",".join("?" * len(wanted))
            rows = await self._base.rows(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id",
                                         wanted)
            self._active = {job.id: job for job in _jobs(rows)}
            self._data_version = version
        elif stale := self._base.take_written():
            # Taken before the reads: a write meanwhile marks its row for the next call.
            fresh = {job.id: job for job in await self._jobs_by_ids(stale)}
            for job_id in stale:
                job = fresh.get(job_id)
                if job is not None and job.state in JOB_ACTIVE:
                    self._active[job_id] = job
                else:
                    self._active.pop(job_id, None)
            self._active = dict(sorted(self._active.items()))
        return list(self._active.values())

    def as_written_all(self, chunks: Iterable[Any]) -> list[int]:
        """The kept rows of the chunks' jobs (`job_id`, `fields`) updated to the fields just
        written (they read back the same), instead of reading them again; the ids of the jobs
        not kept. One loop: a pass writes thousands."""
        active = self._active
        if active is None:
            return [c.job_id for c in chunks]
        missed: list[int] = []
        get, new, setattr_ = active.get, object.__new__, object.__setattr__
        for c in chunks:
            kept = get(job_id := c.job_id)
            if kept is None:
                missed.append(job_id)
                continue
            copy = new(Job)   # `with_fields` without its checks: one dict merge
            setattr_(copy, "__dict__", kept.__dict__ | c.fields)
            active[job_id] = copy
        return missed

    async def _jobs_by_ids(self, ids: Sequence[int]) -> list[Job]:
        out: list[Job] = []
        for i in range(0, len(ids), _IDS_PER_QUERY):
            part = ids[i:i + _IDS_PER_QUERY]
            marks = ",".join("?" * len(part))
            rows = await self._base.rows(f"SELECT * FROM jobs WHERE id IN ({marks}) ORDER BY id",
                                         part)
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
