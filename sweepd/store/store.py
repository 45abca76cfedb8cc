"""The only code that runs SQL. One aiosqlite connection; writes in explicit transactions.

Every state change is a guarded UPDATE (`WHERE state IN (allowed sources)`) plus an event
row, in one transaction. Zero rows changed raises InvalidTransition.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite

from sweepd.core.states import (
    JOB_ACTIVE,
    JOB_TRANSITIONS,
    RUN_TRANSITIONS,
    SWEEP_TRANSITIONS,
    JobState,
    RunState,
    SweepState,
    sources,
)
from sweepd.store.migrate import latest_version, migrate
from sweepd.store.rows import Event, Exclusion, Job, Run, RunParams, SignalRow, StepRow, Sweep

E = TypeVar("E", bound=StrEnum)

_JOB_FIELDS = frozenset(Job.__dataclass_fields__) - {"id", "run_id", "sweep_id", "state"}
_RUN_FIELDS = frozenset({"outcome", "tgs", "mfu", "failure_class", "detail", "not_before"})
# What a pass's log reading writes to most jobs: applied to the kept active jobs as written
# (they read back the same), instead of reading the rows again.
_TAIL_FIELDS = frozenset({"log_offset", "log_identity", "last_output_at", "phase", "last_step"})
# Rows per `WHERE id IN (...)` read (well under SQLite's limit on bound parameters).
_IDS_PER_QUERY = 500


class LogChunkLike(Protocol):
    job_id: int
    fields: dict[str, Any]
    steps: list[dict[str, Any]]
    signals: list[dict[str, Any]]


class InvalidTransition(Exception):
    pass


class NotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class Store:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        # The active jobs as last read, by id, kept between passes: a pass re-reads only
        # the rows this connection wrote since (`_stale_jobs`), and all of them when
        # another connection committed (`PRAGMA data_version` moved).
        self._active: dict[int, Job] | None = None
        self._stale_jobs: set[int] = set()
        self._data_version: int | None = None

    @classmethod
    async def open(cls, path: Path | str) -> Store:
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await migrate(conn)
        return cls(conn)

    @classmethod
    async def open_readonly(cls, path: Path | str) -> Store:
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

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[aiosqlite.Row]:
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

    async def _one(self, sql: str, args: Sequence[Any], what: str) -> aiosqlite.Row:
        rows = await self._all(sql, args)
        if not rows:
            raise NotFound(f"{what} not found")
        return rows[0]

    # -- events ------------------------------------------------------------------------

    @staticmethod
    async def _event(
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

    async def add_event(
        self, sweep_id: int, kind: str, reason: str, *, rule: str | None = None,
        evidence: str | None = None, run_id: int | None = None, job_id: int | None = None,
    ) -> None:
        async with self.tx() as conn:
            await self._event(conn, sweep_id, kind, reason, rule=rule, evidence=evidence,
                              run_id=run_id, job_id=job_id)

    async def events(self, sweep_id: int, after: int = 0, kind: str | None = None) -> list[Event]:
        sql = "SELECT * FROM events WHERE sweep_id = ? AND id > ?"
        args: list[Any] = [sweep_id, after]
        if kind:
            sql += " AND kind = ?"
            args.append(kind)
        return [Event.from_row(r) for r in await self._all(sql + " ORDER BY id", args)]

    async def last_event_at(self, sweep_id: int) -> str | None:
        rows = await self._all("SELECT at FROM events WHERE sweep_id = ? ORDER BY id DESC "
                               "LIMIT 1", [sweep_id])
        return str(rows[0][0]) if rows else None

    # -- guarded transitions -----------------------------------------------------------

    async def _guarded(
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

    # -- sweeps ------------------------------------------------------------------------

    async def create_sweep(self, kind: str, name: str, spec: Mapping[str, Any],
                           submitted_by: str | None = None) -> int:
        async with self.tx() as conn:
            cur = await conn.execute(
                "INSERT INTO sweeps (kind, name, spec_json, submitted_by) VALUES (?,?,?,?)",
                (kind, name, json.dumps(spec, sort_keys=True), submitted_by),
            )
            sweep_id = int(cur.lastrowid or 0)
            await self._event(conn, sweep_id, "transition", "sweep submitted",
                              to_state=SweepState.QUEUED)
        return sweep_id

    async def sweep(self, sweep_id: int) -> Sweep:
        return Sweep.from_row(await self._one("SELECT * FROM sweeps WHERE id = ?", (sweep_id,),
                                              f"sweep {sweep_id}"))

    async def sweeps(self, states: Iterable[SweepState] | None = None) -> list[Sweep]:
        if states is None:
            rows = await self._all("SELECT * FROM sweeps ORDER BY id")
        else:
            wanted = [str(s) for s in states]
            marks = ",".join("?" * len(wanted))
            rows = await self._all(
                f"SELECT * FROM sweeps WHERE state IN ({marks}) ORDER BY id", wanted)
        return [Sweep.from_row(r) for r in rows]

    async def find_sweeps(self, states: Sequence[str] = (), kinds: Sequence[str] = (),
                          since: str | None = None, user: str | None = None) -> list[Sweep]:
        """Sweeps matching every filter given, newest first (`since`: created at or after,
        an ISO time as the store writes them)."""
        where, args = ["1 = 1"], []
        for column, wanted in (("state", states), ("kind", kinds)):
            if wanted:
                where.append(f"{column} IN ({','.join('?' * len(wanted))})")
                args += list(wanted)
        if since is not None:
            where.append("created_at >= ?")
            args.append(since)
        if user is not None:
            where.append("submitted_by = ?")
            args.append(user)
        rows = await self._all(f"SELECT * FROM sweeps WHERE {' AND '.join(where)}"
                               " ORDER BY id DESC", args)
        return [Sweep.from_row(r) for r in rows]

    async def count_by_state(self, table: str) -> dict[str, int]:
        """How many sweeps (or jobs, or runs) are in each state."""
        if table not in ("sweeps", "jobs", "runs"):
            raise ValueError(f"not a table with states: {table}")
        rows = await self._all(f"SELECT state, count(*) FROM {table} GROUP BY state")
        return {str(r[0]): int(r[1]) for r in rows}

    async def job_seconds_of(self, kind: str, model: str | None) -> list[float]:
        """Cluster seconds the ended jobs of earlier sweeps of this kind (and model) took."""
        rows = await self._all(
            "SELECT j.ended_at - j.submitted_at FROM jobs j JOIN sweeps s ON s.id = j.sweep_id"
            " WHERE s.kind = ? AND j.state IN ('done', 'failed') AND j.ended_at IS NOT NULL"
            " AND j.submitted_at IS NOT NULL"
            " AND (? IS NULL OR json_extract(s.spec_json, '$.model') = ?)",
            (kind, model, model))
        return [float(r[0]) for r in rows]

    async def transition_sweep(
        self, sweep_id: int, to: SweepState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, verdict: Mapping[str, Any] | None = None,
        progress: str | None = None,
    ) -> None:
        sets: dict[str, Any] = {"reason": reason,
                                "updated_at": _now_sql()}
        if verdict is not None:
            sets["verdict_json"] = json.dumps(verdict, sort_keys=True)
        async with self.tx() as conn:
            old = await self._guarded(conn, "sweeps", SWEEP_TRANSITIONS, sweep_id, to, sets)
            await self._event(conn, sweep_id, "transition", reason, from_state=old,
                              to_state=to, rule=rule, evidence=evidence)
            if progress:
                await self._event(conn, sweep_id, "progress", progress)

    # -- runs --------------------------------------------------------------------------

    async def add_run(
        self, sweep_id: int, label: str, params: RunParams, nodes: str, reason: str,
        rule: str | None = None,
    ) -> Run:
        async with self.tx() as conn:
            async with conn.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM runs WHERE sweep_id = ?", (sweep_id,)
            ) as cur:
                row = await cur.fetchone()
            seq = int(row[0]) if row else 1
            c = await conn.execute(
                "INSERT INTO runs (sweep_id, seq, label, params_json, nodes) VALUES (?,?,?,?,?)",
                (sweep_id, seq, label, params.to_json(), nodes),
            )
            run_id = int(c.lastrowid or 0)
            await self._event(conn, sweep_id, "decision", reason, run_id=run_id, rule=rule,
                              to_state=RunState.PENDING)
        return await self.run(run_id)

    async def run(self, run_id: int) -> Run:
        return Run.from_row(await self._one("SELECT * FROM runs WHERE id = ?", (run_id,),
                                            f"run {run_id}"))

    async def runs(self, sweep_id: int) -> list[Run]:
        rows = await self._all("SELECT * FROM runs WHERE sweep_id = ? ORDER BY seq", (sweep_id,))
        return [Run.from_row(r) for r in rows]

    async def transition_run(
        self, run_id: int, to: RunState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, progress: str | None = None, **fields: Any,
    ) -> None:
        unknown = set(fields) - _RUN_FIELDS
        if unknown:
            raise ValueError(f"not run fields: {sorted(unknown)}")
        run = await self.run(run_id)
        async with self.tx() as conn:
            old = await self._guarded(conn, "runs", RUN_TRANSITIONS, run_id, to, fields)
            await self._event(conn, run.sweep_id, "transition", reason, run_id=run_id,
                              from_state=old, to_state=to, rule=rule, evidence=evidence)
            if progress:
                await self._event(conn, run.sweep_id, "progress", progress, run_id=run_id)

    async def sweeps_with_due_retries(self, now: float) -> set[int]:
        rows = await self._all(
            "SELECT DISTINCT sweep_id FROM runs WHERE not_before IS NOT NULL"
            " AND not_before <= ? AND state IN ('pending', 'active')", (now,))
        return {int(r[0]) for r in rows}

    async def update_run_not_before(self, run_id: int, at: float) -> None:
        async with self.tx() as conn:
            await conn.execute("UPDATE runs SET not_before = ? WHERE id = ?", (at, run_id))

    # -- jobs --------------------------------------------------------------------------

    async def create_job(self, run: Run, token: str, job_name: str, nodes: str) -> Job:
        """Write-ahead: the job row exists (state `submitting`) before the scheduler call.
        The run's nodes become the job's: a retry after an exclusion runs on fewer nodes,
        and the run's result must say which ones it was measured on."""
        async with self.tx() as conn:
            async with conn.execute(
                "SELECT coalesce(max(attempt), 0) + 1 FROM jobs WHERE run_id = ?", (run.id,)
            ) as cur:
                row = await cur.fetchone()
            attempt = int(row[0]) if row else 1
            c = await conn.execute(
                "INSERT INTO jobs (run_id, sweep_id, attempt, token, job_name, nodes)"
                " VALUES (?,?,?,?,?,?)",
                (run.id, run.sweep_id, attempt, token, job_name, nodes),
            )
            job_id = int(c.lastrowid or 0)
            await conn.execute("UPDATE runs SET nodes = ? WHERE id = ?", (nodes, run.id))
            await self._event(conn, run.sweep_id, "transition",
                              f"submitting attempt {attempt} of {run.label} on {nodes}",
                              run_id=run.id, job_id=job_id, to_state=JobState.SUBMITTING)
        self._written([job_id])
        return await self.job(job_id)

    async def job(self, job_id: int) -> Job:
        return Job.from_row(await self._one("SELECT * FROM jobs WHERE id = ?", (job_id,),
                                            f"job {job_id}"))

    async def jobs(self, sweep_id: int) -> list[Job]:
        rows = await self._all("SELECT * FROM jobs WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        return [Job.from_row(r) for r in rows]

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
            self._active = {int(r["id"]): Job.from_row(r) for r in rows}
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
            out += [Job.from_row(r) for r in rows]
        return out

    def _written(self, job_ids: Iterable[int]) -> None:
        """These job rows were written (or a write to them was tried): the next
        `active_jobs` reads them again. Called after the write, never before: a read in
        between would otherwise take the old row for the new one."""
        self._stale_jobs.update(job_ids)

    async def jobs_by_tokens(self, tokens: Iterable[str]) -> dict[str, Job]:
        wanted = sorted(set(tokens))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = await self._all(f"SELECT * FROM jobs WHERE token IN ({marks})", wanted)
        return {str(r["token"]): Job.from_row(r) for r in rows}

    async def daemon_value(self, key: str) -> str | None:
        rows = await self._all("SELECT value FROM daemon_state WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def set_daemon_value(self, key: str, value: str | None) -> None:
        """Set (or, with None, remove) one key of the daemon's own persistent state."""
        async with self.tx() as conn:
            if value is None:
                await conn.execute("DELETE FROM daemon_state WHERE key = ?", (key,))
            else:
                await conn.execute("INSERT INTO daemon_state (key, value) VALUES (?, ?) ON "
                                   "CONFLICT (key) DO UPDATE SET value = excluded.value",
                                   (key, value))

    async def store_id(self) -> str:
        """This store's identity (migration 3), part of every token it issues."""
        row = await self._one("SELECT value FROM daemon_state WHERE key = 'store.id'", (),
                              "store id")
        return str(row[0])

    async def transition_job(
        self, job_id: int, to: JobState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, **fields: Any,
    ) -> None:
        unknown = set(fields) - _JOB_FIELDS
        if unknown:
            raise ValueError(f"not job fields: {sorted(unknown)}")
        job = await self.job(job_id)
        try:
            async with self.tx() as conn:
                old = await self._guarded(conn, "jobs", JOB_TRANSITIONS, job_id, to, fields)
                await self._event(conn, job.sweep_id, "transition", reason, run_id=job.run_id,
                                  job_id=job_id, from_state=old, to_state=to, rule=rule,
                                  evidence=evidence)
        finally:
            self._written([job_id])

    async def update_job(self, job_id: int, **fields: Any) -> None:
        """Progress that is not a state change (offsets, phase, scheduler state)."""
        unknown = set(fields) - _JOB_FIELDS
        if unknown or not fields:
            raise ValueError(f"bad job fields: {sorted(unknown) or 'none'}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        try:
            async with self.tx() as conn:
                await conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?",
                                   (*fields.values(), job_id))
        finally:
            self._written([job_id])

    async def record_logs(self, chunks: Sequence[LogChunkLike]) -> None:
        """Facts read from logs, each with its job's new offset, in one transaction: a crash
        can never store facts without their offset (or the reverse)."""
        if not chunks:
            return
        # Inside a caller's transaction the write may yet be rolled back: read again.
        nested = self._lock.locked() and self._owner is asyncio.current_task()
        try:
            await self._record_logs(chunks)
        except BaseException:
            self._written(c.job_id for c in chunks)
            raise
        active = self._active if self._active is not None else {}
        for c in chunks:
            kept = active.get(c.job_id)
            if kept is not None and not nested and c.fields.keys() <= _TAIL_FIELDS:
                active[c.job_id] = kept.with_fields(c.fields)
            else:
                self._written([c.job_id])

    async def _record_logs(self, chunks: Sequence[LogChunkLike]) -> None:
        async with self.tx() as conn:
            await conn.executemany(
                "INSERT OR REPLACE INTO steps (job_id, step, seconds, tflops, mfu, tgs, loss)"
                " VALUES (?,?,?,?,?,?,?)",
                [(c.job_id, s["step"], s.get("seconds"), s.get("tflops"), s.get("mfu"),
                  s["tgs"], s.get("loss")) for c in chunks for s in c.steps])
            await conn.executemany(
                "INSERT OR IGNORE INTO signals"
                " (job_id, offset, rank, node, klass, detail, line) VALUES (?,?,?,?,?,?,?)",
                [(c.job_id, g["offset"], g.get("rank"), g.get("node"), g["klass"],
                  g.get("detail"), g["line"]) for c in chunks for g in c.signals])
            # Most chunks set the same columns: one UPDATE statement per column set.
            by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
            for c in chunks:
                columns = tuple(sorted(c.fields))
                by_columns.setdefault(columns, []).append(
                    (*(c.fields[k] for k in columns), c.job_id))
            for columns, rows in by_columns.items():
                unknown = set(columns) - _JOB_FIELDS
                if unknown:
                    raise ValueError(f"not job fields: {sorted(unknown)}")
                if columns:
                    sets = ", ".join(f"{k} = ?" for k in columns)
                    await conn.executemany(f"UPDATE jobs SET {sets} WHERE id = ?", rows)

    async def steps(self, job_id: int) -> list[StepRow]:
        rows = await self._all("SELECT * FROM steps WHERE job_id = ? ORDER BY step", (job_id,))
        return [StepRow.from_row(r) for r in rows]

    async def signals(self, job_id: int) -> list[SignalRow]:
        rows = await self._all("SELECT * FROM signals WHERE job_id = ? ORDER BY offset", (job_id,))
        return [SignalRow.from_row(r) for r in rows]

    async def latest_mem_used_on(self, nodes: str, sweep_ids: Iterable[int]) -> float | None:
        """The memory (GB) recorded by the latest job of these sweeps that ran on exactly
        these nodes (a collected hostlist) and recorded one; one row, not every job there."""
        rows = await self._all(
            "SELECT mem_used_gb FROM jobs WHERE nodes = ? AND mem_used_gb IS NOT NULL"
            " AND sweep_id IN (SELECT value FROM json_each(?)) ORDER BY id DESC LIMIT 1",
            (nodes, json.dumps(sorted(set(sweep_ids)))),
        )
        return float(rows[0][0]) if rows else None

    # -- exclusions --------------------------------------------------------------------

    async def exclusions(self, sweep_id: int, active_only: bool = True) -> list[Exclusion]:
        sql = "SELECT * FROM exclusions WHERE sweep_id = ?" + (" AND active = 1" if active_only
                                                                 else "")
        return [Exclusion.from_row(r) for r in await self._all(sql + " ORDER BY rowid",
                                                                (sweep_id,))]

    async def exclude_node(
        self, sweep_id: int, node: str, job_id: int | None, reason: str, rule: str,
        evidence: str | None,
    ) -> None:
        async with self.tx() as conn:
            await conn.execute(
                "INSERT INTO exclusions (sweep_id, node, job_id, reason) VALUES (?,?,?,?)"
                " ON CONFLICT (sweep_id, node) DO UPDATE SET active = 1, reason = excluded.reason,"
                " job_id = excluded.job_id",
                (sweep_id, node, job_id, reason),
            )
            await self._event(conn, sweep_id, "decision", f"exclude {node}: {reason}",
                              job_id=job_id, rule=rule, evidence=evidence)

    async def set_exclusions(self, sweep_id: int, nodes: Sequence[str], reason: str) -> None:
        """A person's answer to a stop: exactly these nodes stay excluded."""
        async with self.tx() as conn:
            await conn.execute("UPDATE exclusions SET active = 0 WHERE sweep_id = ?", (sweep_id,))
            for node in nodes:
                await conn.execute(
                    "INSERT INTO exclusions (sweep_id, node, reason) VALUES (?,?,?)"
                    " ON CONFLICT (sweep_id, node) DO UPDATE SET active = 1",
                    (sweep_id, node, reason),
                )
            await self._event(conn, sweep_id, "decision",
                              f"exclusions set to [{', '.join(nodes)}]: {reason}",
                              rule="person.resume")


    # -- a kind's lookup by spec field (model perf's gather) ----------------------------

    async def sweeps_of_model(self, model: str) -> list[Sweep]:
        """The sweeps (of any kind) whose spec names this model, oldest first: SQLite picks
        them out, so the rows of other models' sweeps are never built."""
        rows = await self._all("SELECT * FROM sweeps WHERE json_extract(spec_json, '$.model') = ?"
                               " ORDER BY id", (model,))
        return [Sweep.from_row(r) for r in rows]

def _readonly_uri(path: Path) -> str:
    if not path.is_file():
        raise NotFound(f"no sweepd database at {path}")
    return f"{path.absolute().as_uri()}?mode=ro"


def _now_sql() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
