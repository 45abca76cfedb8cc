"""The trail's table: events (transitions, decisions, notes, progress), and the
daemon's own key-value state beside it."""

from __future__ import annotations

from typing import Any

from sweepd.store.base import StoreBase
from sweepd.store.rows import Event


class EventsTable(StoreBase):
    """The event trail and the daemon's own state."""

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
