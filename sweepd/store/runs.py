"""The runs table: a sweep's planned runs, their states and their retry times."""

from __future__ import annotations

from typing import Any

from sweepd.store.base import StoreBase
from sweepd.store.rows import Run, RunParams
from sweepd.store.states import RUN_TRANSITIONS, RunState

_RUN_FIELDS = frozenset({"outcome", "tgs", "mfu", "failure_class", "detail", "not_before"})


class RunsTable:
    """Runs."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def add(
        self, sweep_id: int, label: str, params: RunParams, nodes: str, reason: str,
        rule: str | None = None,
    ) -> Run:
        async with self._base.tx() as conn:
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
            await self._base.event(conn, sweep_id, "decision", reason, run_id=run_id, rule=rule,
                                   to_state=RunState.PENDING)
        return await self.get(run_id)

    async def get(self, run_id: int) -> Run:
        return Run.from_row(await self._base.one("SELECT * FROM runs WHERE id = ?", (run_id,),
                                                 f"run {run_id}"))

    async def of_sweep(self, sweep_id: int) -> list[Run]:
        rows = await self._base.rows("SELECT * FROM runs WHERE sweep_id = ? ORDER BY seq",
                                     (sweep_id,))
        return [Run.from_row(r) for r in rows]

    async def transition(
        self, run_id: int, to: RunState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, progress: str | None = None, **fields: Any,
    ) -> None:
        unknown = set(fields) - _RUN_FIELDS
        if unknown:
            raise ValueError(f"not run fields: {sorted(unknown)}")
        run = await self.get(run_id)
        async with self._base.tx() as conn:
            old = await self._base.guarded(conn, "runs", RUN_TRANSITIONS, run_id, to, fields)
            await self._base.event(conn, run.sweep_id, "transition", reason, run_id=run_id,
                                   from_state=old, to_state=to, rule=rule, evidence=evidence)
            if progress:
                await self._base.event(conn, run.sweep_id, "progress", progress, run_id=run_id)

    async def sweeps_with_due_retries(self, now: float) -> set[int]:
        """Sweeps with a run whose retry time is over (asked every pass): only the runs
        given a retry time are read (`runs_with_retry_time`, schema version 12)."""
        rows = await self._base.rows(
            "SELECT DISTINCT sweep_id FROM runs WHERE not_before IS NOT NULL"
            " AND not_before <= ? AND state IN ('pending', 'active')", (now,))
        return {int(r[0]) for r in rows}

    async def set_not_before(self, run_id: int, at: float) -> None:
        async with self._base.tx() as conn:
            await conn.execute("UPDATE runs SET not_before = ? WHERE id = ?", (at, run_id))
