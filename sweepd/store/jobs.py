"""The jobs table and what its logs add: job rows (write-ahead, by token, their
states and fields), their steps and signals, and a pass's log facts in one transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from sweepd.store.active import ActiveJobs
from sweepd.store.base import StoreBase
from sweepd.store.rows import Job, Run, SignalRow, StepRow
from sweepd.store.spans import SPAN_SECONDS_SQL, SpanTotal
from sweepd.store.states import JOB_TRANSITIONS, JobState

_JOB_FIELDS = frozenset(Job.__dataclass_fields__) - {"id", "run_id", "sweep_id", "state"}
# What a pass's log reading writes to most jobs: applied to the kept active jobs as written
# (they read back the same), instead of reading the rows again.
_TAIL_FIELDS = frozenset({"log_offset", "log_identity", "last_output_at", "phase", "last_step",
                          "facts_json"})


class LogChunkLike(Protocol):
    job_id: int
    fields: dict[str, Any]
    steps: list[dict[str, Any]]
    signals: list[dict[str, Any]]


class JobsTable:
    """Jobs, with their steps and signals."""

    def __init__(self, base: StoreBase, active: ActiveJobs) -> None:
        self._base = base
        self._active = active   # a pass's log facts update its kept rows as written

    async def create(self, run: Run, token: str, job_name: str, nodes: str) -> Job:
        """Write-ahead: the job row exists (state `submitting`) before the scheduler call.
        The run's nodes become the job's: a retry after an exclusion runs on fewer nodes,
        and the run's result must say which ones it was measured on."""
        async with self._base.tx() as conn:
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
            await self._base.event(conn, run.sweep_id, "transition",
                                   f"submitting attempt {attempt} of {run.label} on {nodes}",
                                   run_id=run.id, job_id=job_id, to_state=JobState.SUBMITTING)
        self._base.written([job_id])
        return await self.get(job_id)

    async def get(self, job_id: int) -> Job:
        return Job.from_row(await self._base.one("SELECT * FROM jobs WHERE id = ?", (job_id,),
                                                 f"job {job_id}"))

    async def of_sweep(self, sweep_id: int) -> list[Job]:
        rows = await self._base.rows("SELECT * FROM jobs WHERE sweep_id = ? ORDER BY id",
                                     (sweep_id,))
        return [Job.from_row(r) for r in rows]

    async def span_totals(self, sweep_id: int, leave_out: int) -> list[SpanTotal]:
        """A sweep's jobs but `leave_out`, by node set: their spans (`spans.span_of`)
        summed, in one aggregate query: the cost cap reads it before every submission, and
        a sweep's every row read each time grew with its jobs."""
        rows = await self._base.rows(
            "SELECT nodes, sum(s), coalesce(sum(CASE WHEN ended_at IS NOT NULL THEN s END), 0),"
            " count(CASE WHEN ended_at IS NOT NULL THEN 1 END)"
            f" FROM (SELECT nodes, ended_at, {SPAN_SECONDS_SQL} AS s FROM jobs"
            "  WHERE sweep_id = ? AND id != ?) WHERE s IS NOT NULL GROUP BY nodes ORDER BY nodes",
            (sweep_id, leave_out))
        return [SpanTotal(str(r[0]), float(r[1]), float(r[2]), int(r[3])) for r in rows]

    async def by_tokens(self, tokens: Iterable[str]) -> dict[str, Job]:
        wanted = sorted(set(tokens))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = await self._base.rows(f"SELECT * FROM jobs WHERE token IN ({marks})", wanted)
        return {str(r["token"]): Job.from_row(r) for r in rows}

    async def transition(
        self, job_id: int, to: JobState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, **fields: Any,
    ) -> None:
        unknown = set(fields) - _JOB_FIELDS
        if unknown:
            raise ValueError(f"not job fields: {sorted(unknown)}")
        job = await self.get(job_id)
        try:
            async with self._base.tx() as conn:
                old = await self._base.guarded(conn, "jobs", JOB_TRANSITIONS, job_id, to, fields)
                await self._base.event(conn, job.sweep_id, "transition", reason, run_id=job.run_id,
                                       job_id=job_id, from_state=old, to_state=to, rule=rule,
                                       evidence=evidence)
        finally:
            self._base.written([job_id])

    async def update(self, job_id: int, **fields: Any) -> None:
        """Progress that is not a state change (offsets, phase, scheduler state)."""
        unknown = set(fields) - _JOB_FIELDS
        if unknown or not fields:
            raise ValueError(f"bad job fields: {sorted(unknown) or 'none'}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        try:
            async with self._base.tx() as conn:
                await conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?",
                                   (*fields.values(), job_id))
        finally:
            self._base.written([job_id])

    async def record_logs(self, chunks: Sequence[LogChunkLike]) -> None:
        """Facts read from logs, each with its job's new offset, in one transaction: a crash
        can never store facts without their offset (or the reverse)."""
        if not chunks:
            return
        # Inside a caller's transaction the write may yet be rolled back: read again.
        nested = self._base.in_own_tx()
        # Most chunks set the same columns (offset, identity, output time, phase, step):
        # one UPDATE statement per column set, its rows built once.
        by_columns: dict[tuple[str, ...], list[LogChunkLike]] = {}
        for c in chunks:
            group = by_columns.get(columns := tuple(c.fields))
            if group is None:
                by_columns[columns] = [c]
            else:
                group.append(c)
        try:
            await self._record_logs(chunks, by_columns)
        except BaseException:
            self._base.written(c.job_id for c in chunks)
            raise
        for columns, group in by_columns.items():
            if nested or not set(columns) <= _TAIL_FIELDS:
                self._base.written(c.job_id for c in group)
                continue
            if missed := self._active.as_written_all(group):
                self._base.written(missed)

    async def _record_logs(self, chunks: Sequence[LogChunkLike],
                           by_columns: dict[tuple[str, ...], list[LogChunkLike]]) -> None:
        for columns in by_columns:
            unknown = set(columns) - _JOB_FIELDS
            if unknown:
                raise ValueError(f"not job fields: {sorted(unknown)}")
        async with self._base.tx() as conn:
            steps = [(c.job_id, s["step"], s.get("seconds"), s.get("tflops"), s.get("mfu"),
                      s["tgs"], s.get("loss")) for c in chunks if c.steps for s in c.steps]
            if steps:
                await conn.executemany(
                    "INSERT OR REPLACE INTO steps (job_id, step, seconds, tflops, mfu, tgs,"
                    " loss) VALUES (?,?,?,?,?,?,?)", steps)
            signals = [(c.job_id, g["offset"], g.get("rank"), g.get("node"), g["klass"],
                        g.get("detail"), g["line"]) for c in chunks if c.signals
                       for g in c.signals]
            if signals:
                await conn.executemany(
                    "INSERT OR IGNORE INTO signals"
                    " (job_id, offset, rank, node, klass, detail, line) VALUES (?,?,?,?,?,?,?)",
                    signals)
            for columns, group in by_columns.items():
                if columns:
                    sets = ", ".join(f"{k} = ?" for k in columns)
                    await conn.executemany(f"UPDATE jobs SET {sets} WHERE id = ?",
                                           [(*c.fields.values(), c.job_id) for c in group])

    async def steps(self, job_id: int) -> list[StepRow]:
        rows = await self._base.rows("SELECT * FROM steps WHERE job_id = ? ORDER BY step",
                                     (job_id,))
        return [StepRow.from_row(r) for r in rows]

    async def signals(self, job_id: int) -> list[SignalRow]:
        rows = await self._base.rows("SELECT * FROM signals WHERE job_id = ? ORDER BY offset",
                                     (job_id,))
        return [SignalRow.from_row(r) for r in rows]

    async def latest_mem_used_of_model(self, nodes: str, model: str) -> float | None:
        """The memory (GB) recorded by the latest job that ran on exactly these nodes (a
        collected hostlist), recorded one, and belongs to a sweep (of any kind) whose spec
        names this model. One indexed walk (`jobs_with_memory_by_nodes`, schema version 12):
        the jobs on these nodes with a memory line, newest first, to the first of the model;
        neither the model's sweeps nor their other jobs are read, however many there are."""
        rows = await self._base.rows(
            "SELECT j.mem_used_gb FROM jobs j JOIN sweeps s ON s.id = j.sweep_id"
            " WHERE j.nodes = ? AND j.mem_used_gb IS NOT NULL"
            " AND json_extract(s.spec_json, '$.model') = ? ORDER BY j.id DESC LIMIT 1",
            (nodes, model),
        )
        return float(rows[0][0]) if rows else None
