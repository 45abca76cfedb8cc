"""The daemon's own key-value state (`daemon_state`): what it keeps between runs, and
this store's identity."""

from __future__ import annotations

from sweepd.store.base import StoreBase


class DaemonStateTable:
    """The daemon's own persistent keys."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def get(self, key: str) -> str | None:
        rows = await self._base.rows("SELECT value FROM daemon_state WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def set(self, key: str, value: str | None) -> None:
        """Set (or, with None, remove) one key of the daemon's own persistent state."""
        async with self._base.tx() as conn:
            if value is None:
                await conn.execute("DELETE FROM daemon_state WHERE key = ?", (key,))
            else:
                await conn.execute("INSERT INTO daemon_state (key, value) VALUES (?, ?) ON "
                                   "CONFLICT (key) DO UPDATE SET value = excluded.value",
                                   (key, value))

    async def store_id(self) -> str:
        """This store's identity (migration 3), part of every token it issues."""
        row = await self._base.one("SELECT value FROM daemon_state WHERE key = 'store.id'", (),
                                   "store id")
        return str(row[0])
