"""The sweeps table: created, read, found, counted and moved between states."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sweepd.store.base import StoreBase, now_sql
from sweepd.store.rows import Sweep
from sweepd.store.states import SWEEP_TRANSITIONS, SweepState


class SweepsTable:
    """Sweeps."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def create(self, kind: str, name: str, spec: Mapping[str, Any],
                           submitted_by: str | None = None) -> int:
        async with self._base.tx() as conn:
            cur = await conn.execute(
                "INSERT INTO sweeps (kind, name, spec_json, submitted_by) VALUES (?,?,?,?)",
                (kind, name, json.dumps(spec, sort_keys=True), submitted_by),
            )
            sweep_id = int(cur.lastrowid or 0)
            await self._base.event(conn, sweep_id, "transition", "sweep submitted",
                                   to_state=SweepState.QUEUED)
        return sweep_id

    async def get(self, sweep_id: int) -> Sweep:
        return Sweep.from_row(await self._base.one("SELECT * FROM sweeps WHERE id = ?", (sweep_id,),
                                                   f"sweep {sweep_id}"))

    async def all(self, states: Iterable[SweepState] | None = None) -> list[Sweep]:
        if states is None:
            rows = await self._base.rows("SELECT * FROM sweeps ORDER BY id")
        else:
            wanted = [str(s) for s in states]
            marks = ",".join("?" * len(wanted))
            rows = await self._base.rows(
                f"SELECT * FROM sweeps WHERE state IN ({marks}) ORDER BY id", wanted)
        return [Sweep.from_row(r) for r in rows]

    async def settled_of_model(self, kind: str, model: str) -> list[Sweep]:
        """The done sweeps of this kind whose spec names this model and whose verdict found
        a best value and does not call itself unsettled (`settled` false or 0), oldest
        first: the sweeps a later one may start from (model perf's gather, which judges
        each further). SQLite picks them out, so a model's running, queued, failed or
        unsettled sweeps, and its sweeps of other kinds, are never read: a plan costs the
        same beside one of them as beside a thousand."""
        rows = await self._base.rows(
            "SELECT * FROM sweeps WHERE state = ? AND kind = ?"
            # A verdict SQLite's JSON cannot read (Python's `Infinity` / `NaN` from a garbled
            # log's number) is left to the caller to judge, never an error for every model.
            " AND CASE WHEN json_valid(verdict_json) THEN"
            "  json_extract(verdict_json, '$.best') IS NOT NULL"
            # A settled flag absent reads as settled; false and 0 (JSON) read as 0.
            "  AND coalesce(json_extract(verdict_json, '$.settled'), 1) != 0 ELSE 1 END"
            " AND CASE WHEN json_valid(spec_json)"
            "  THEN json_extract(spec_json, '$.model') = ? ELSE 0 END ORDER BY id",
            (SweepState.DONE, kind, model))
        return [Sweep.from_row(r) for r in rows]

    async def find(self, states: Sequence[str] = (), kinds: Sequence[str] = (),
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
        rows = await self._base.rows(f"SELECT * FROM sweeps WHERE {' AND '.join(where)}"
                                     " ORDER BY id DESC", args)
        return [Sweep.from_row(r) for r in rows]

    async def job_seconds_of(self, kind: str, model: str | None) -> list[float]:
        """Cluster seconds the ended jobs of earlier sweeps of this kind (and model) took."""
        rows = await self._base.rows(
            "SELECT j.ended_at - j.submitted_at FROM jobs j JOIN sweeps s ON s.id = j.sweep_id"
            " WHERE s.kind = ? AND j.state IN ('done', 'failed') AND j.ended_at IS NOT NULL"
            " AND j.submitted_at IS NOT NULL"
            " AND (? IS NULL OR json_extract(s.spec_json, '$.model') = ?)",
            (kind, model, model))
        return [float(r[0]) for r in rows]

    async def transition(
        self, sweep_id: int, to: SweepState, reason: str, *, rule: str | None = None,
        evidence: str | None = None, verdict: Mapping[str, Any] | None = None,
        progress: str | None = None,
    ) -> None:
        sets: dict[str, Any] = {"reason": reason,
                                "updated_at": now_sql()}
        if verdict is not None:
            sets["verdict_json"] = json.dumps(verdict, sort_keys=True)
        async with self._base.tx() as conn:
            old = await self._base.guarded(conn, "sweeps", SWEEP_TRANSITIONS, sweep_id, to, sets)
            await self._base.event(conn, sweep_id, "transition", reason, from_state=old,
                                   to_state=to, rule=rule, evidence=evidence)
            if progress:
                await self._base.event(conn, sweep_id, "progress", progress)
