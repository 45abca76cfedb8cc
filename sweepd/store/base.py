"""The store's ground floor: the one connection, its transactions, the guarded state
transitions, the event row every change writes and the marks on the job rows written. Each
table (`store.Store`'s attributes) is an object holding this one base, not a subclass of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Self, TypeVar

import aiosqlite

from sweepd.store.migrate import latest_version, migrate
from sweepd.store.states import sources

E = TypeVar("E", bound=StrEnum)


class InvalidTransition(Exception):
    pass


class NotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class StoreBase:
    """The connection and what every table's writes share: transactions, guarded
    transitions, the event row, the marks that keep the active jobs fresh. The tables call
    it; nothing outside `sweepd.store` should (but for a raw read, `rows`)."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        # The job rows this connection wrote since the kept active jobs (`active.py`) last
        # read them: the next read takes these again.
        self._stale_jobs: set[int] = set()

    @classmethod
    async def open(cls, path: Path | str) -> Self:
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await migrate(conn)
        return cls(conn)

    @classmethod
    async def open_readonly(cls, path: Path | str) -> Self:
        """A store to read only (`--state-dir`): SQLite's read-only mode, no migration, so
        a daemon or `sweepd run` using the same file is never disturbed."""
        conn = await aiosqlite.connect(_readonly_uri(Path(path)), uri=True,
                                       isolation_level=None)
        conn.row_factory = aiosqlite.Row
        try:
            async with conn.execute("SELECT max(version) FROM schema_version") as cur:
                row = await cur.fetchone()
        except aiosqlite.Error:
            await conn.close()
            raise NotFound(f"{path} is not a sweepd database") from None
        if row is None or row[0] is None or int(row[0]) > latest_version():
            await conn.close()
            raise NotFound(f"{path}: schema version {row[0] if row else None} is not one "
                           "this sweepd reads")
        return cls(conn)

    async def close(self) -> None:
        await self._conn.close()

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction at a time on the shared connection. Nested use in the
        same task joins the open transaction, so a caller can make several store
        operations (a decision and everything it implies) commit together or not at all."""
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            yield self._conn
            return
        async with self._lock:
            self._owner = task
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    await self._conn.execute("ROLLBACK")
                    raise
                await self._conn.execute("COMMIT")
            finally:
                self._owner = None

    def in_own_tx(self) -> bool:
        """Whether the current task holds the open write transaction (its writes may yet be
        rolled back)."""
        return self._lock.locked() and self._owner is asyncio.current_task()

    async def count_by_state(self, table: str) -> dict[str, int]:
        """How many sweeps (or jobs, or runs) are in each state: over any table with states,
        so it is the base's, not one table's."""
        if table not in ("sweeps", "jobs", "runs"):
            raise ValueError(f"not a table with states: {table}")
        rows = await self.rows(f"SELECT state, count(*) FROM {table} GROUP BY state")
        return {str(r[0]): int(r[1]) for r in rows}

    async def rows(self, sql: str, args: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        if self._lock.locked() and self._owner is not asyncio.current_task():
            # Another task's transaction is open on the shared connection: a read now would
            # see its writes before they commit (a `watch` could be handed an event that a
            # rollback then takes back, and its id given to the next). Read after it ends.
            async with self._lock:
                return await self._fetch(sql, args)
        return await self._fetch(sql, args)

    async def _fetch(self, sql: str, args: Sequence[Any]) -> list[aiosqlite.Row]:
        async with self._conn.execute(sql, args) as cur:
            return list(await cur.fetchall())

    async def one(self, sql: str, args: Sequence[Any], what: str) -> aiosqlite.Row:
        rows = await self.rows(sql, args)
        if not rows:
            raise NotFound(f"{what} not found")
        return rows[0]

    @staticmethod
    async def event(
        conn: aiosqlite.Connection,
        sweep_id: int,
        kind: str,
        reason: str,
        *,
        run_id: int | None = None,
        job_id: int | None = None,
        from_state: str | None = None,
        to_state: str | None = None,
        rule: str | None = None,
        evidence: str | None = None,
    ) -> None:
        await conn.execute(
            "INSERT INTO events (sweep_id, run_id, job_id, kind, from_state, to_state, rule,"
            " reason, evidence) VALUES (?,?,?,?,?,?,?,?,?)",
            (sweep_id, run_id, job_id, kind, from_state, to_state, rule, reason, evidence),
        )

    async def guarded(
        self, conn: aiosqlite.Connection, table: str, transitions: Mapping[E, frozenset[E]],
        row_id: int, to: E, sets: Mapping[str, Any],
    ) -> str:
        allowed = sources(transitions, to)
        async with conn.execute(f"SELECT state FROM {table} WHERE id = ?", (row_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"{table[:-1]} {row_id} not found")
        assignments = ", ".join(["state = ?", *(f"{k} = ?" for k in sets)])
        marks = ",".join("?" * len(allowed))
        cur = await conn.execute(
            f"UPDATE {table} SET {assignments} WHERE id = ? AND state IN ({marks})",
            (str(to), *sets.values(), row_id, *allowed),
        )
        if cur.rowcount != 1:
            raise InvalidTransition(f"{table[:-1]} {row_id}: {row[0]} -> {to} is not allowed")
        return str(row[0])

    def written(self, job_ids: Iterable[int]) -> None:
        """These job rows were written (or a write to them was tried): the next
        `ActiveJobs.jobs` reads them again. Called after the write, never before: a read in
        between would otherwise take the old row for the new one."""
        self._stale_jobs.update(job_ids)

    def take_written(self) -> list[int]:
        """The job rows marked written since the last call, by id; the marks are cleared."""
        stale, self._stale_jobs = sorted(self._stale_jobs), set()
        return stale


def _readonly_uri(path: Path) -> str:
    if not path.is_file():
        raise NotFound(f"no sweepd database at {path}")
    return f"{path.absolute().as_uri()}?mode=ro"


def now_sql() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"

