"""The trail's table: events (transitions, decisions, notes, progress)."""

from __future__ import annotations

from typing import Any

from sweepd.store.base import StoreBase
from sweepd.store.rows import Event


class EventsTable:
    """The event trail."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def add(
        self, sweep_id: int, kind: str, reason: str, *, rule: str | None = None,
        evidence: str | None = None, run_id: int | None = None, job_id: int | None = None,
    ) -> None:
        async with self._base.tx() as conn:
            await self._base.event(conn, sweep_id, kind, reason, rule=rule, evidence=evidence,
                                   run_id=run_id, job_id=job_id)

    async def of_sweep(self, sweep_id: int, after: int = 0, kind: str | None = None) -> list[Event]:
        sql = "SELECT * FROM events WHERE sweep_id = ? AND id > ?"
        args: list[Any] = [sweep_id, after]
        if kind:
            sql += " AND kind = ?"
            args.append(kind)
        return [Event.from_row(r) for r in await self._base.rows(sql + " ORDER BY id", args)]

    async def last_at(self, sweep_id: int) -> str | None:
        """When the sweep's latest event was written (None: it has none)."""
        rows = await self._base.rows("SELECT at FROM events WHERE sweep_id = ? ORDER BY id DESC "
                                     "LIMIT 1", [sweep_id])
        return str(rows[0][0]) if rows else None
