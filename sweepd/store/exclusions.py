"""The exclusions table: the nodes each sweep keeps off, and a person's answer to a
stop setting them."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.store.base import StoreBase
from sweepd.store.rows import Exclusion


class ExclusionsTable:
    """Node exclusions."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def of_sweep(self, sweep_id: int, active_only: bool = True) -> list[Exclusion]:
        sql = "SELECT * FROM exclusions WHERE sweep_id = ?" + (" AND active = 1" if active_only
                                                                 else "")
        return [Exclusion.from_row(r) for r in await self._base.rows(sql + " ORDER BY rowid",
                                                                (sweep_id,))]

    async def exclude(
        self, sweep_id: int, node: str, job_id: int | None, reason: str, rule: str,
        evidence: str | None,
    ) -> None:
        async with self._base.tx() as conn:
            await conn.execute(
                "INSERT INTO exclusions (sweep_id, node, job_id, reason) VALUES (?,?,?,?)"
                " ON CONFLICT (sweep_id, node) DO UPDATE SET active = 1, reason = excluded.reason,"
                " job_id = excluded.job_id",
                (sweep_id, node, job_id, reason),
            )
            await self._base.event(conn, sweep_id, "decision", f"exclude {node}: {reason}",
                                   job_id=job_id, rule=rule, evidence=evidence)

    async def set(self, sweep_id: int, nodes: Sequence[str], reason: str) -> None:
        """A person's answer to a stop: exactly these nodes stay excluded."""
        async with self._base.tx() as conn:
            await conn.execute("UPDATE exclusions SET active = 0 WHERE sweep_id = ?", (sweep_id,))
            for node in nodes:
                await conn.execute(
                    "INSERT INTO exclusions (sweep_id, node, reason) VALUES (?,?,?)"
                    " ON CONFLICT (sweep_id, node) DO UPDATE SET active = 1",
                    (sweep_id, node, reason),
                )
            await self._base.event(conn, sweep_id, "decision",
                                   f"exclusions set to [{', '.join(nodes)}]: {reason}",
                                   rule="person.resume")
