"""The campaign tables: what a campaign carried from stage to stage (its stage, the frozen
nodelist, the batch found, the recipe) and the link from each stage's sweep to its campaign.

A stage's sweep is created in the same transaction as its link and the campaign's new
stage (`start_child`): after a crash either all three are there or none, and a second
start of the same stage returns the sweep the first one made (no duplicate sweep, hence no
duplicate job)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweepd.store.base import StoreBase, now_sql
from sweepd.store.rows import _Row
from sweepd.store.states import SweepState
from sweepd.store.sweeps import SweepsTable


@dataclass(frozen=True)
class CampaignRow(_Row):
    sweep_id: int
    stage: str
    nodes: str | None
    batch: int | None
    recipe_json: str | None
    updated_at: str

    @property
    def recipe(self) -> list[str] | None:
        return None if self.recipe_json is None else list(json.loads(self.recipe_json))


@dataclass(frozen=True)
class ChildRow(_Row):
    child_id: int
    campaign_id: int
    stage: str


@dataclass(frozen=True)
class Carried:
    """What a campaign records when it starts a stage: the stage, and what it has found so
    far (None: not found, or unchanged)."""

    stage: str
    nodes: str | None = None
    batch: int | None = None
    recipe: Sequence[str] | None = None


class CampaignsTable:
    """Campaigns and their stages' sweeps (a stage's sweep is made here, with its link)."""

    def __init__(self, base: StoreBase, sweeps: SweepsTable) -> None:
        self._base = base
        self._sweeps = sweeps   # a stage's sweep is created in the campaign's transaction

    async def start_child(self, campaign_id: int, carried: Carried, kind: str, name: str,
                          spec: Mapping[str, Any], submitted_by: str | None) -> tuple[int, bool]:
        """The stage's sweep (queued), linked to its campaign, with the campaign's row
        updated, in one transaction. (its id, True) when made now; (the id, False) when
        the stage already had one (a restart planning the same step again)."""
        async with self._base.tx() as conn:
            async with conn.execute(
                    "SELECT child_id FROM campaign_children WHERE campaign_id = ? AND stage = ?",
                    (campaign_id, carried.stage)) as cur:
                row = await cur.fetchone()
            if row is not None:
                return int(row[0]), False
            child = await self._sweeps.create(kind, name, spec, submitted_by)
            await conn.execute("INSERT INTO campaign_children (child_id, campaign_id, stage) "
                               "VALUES (?,?,?)", (child, campaign_id, carried.stage))
            recipe = None if carried.recipe is None else json.dumps(list(carried.recipe))
            await conn.execute(
                "INSERT INTO campaigns (sweep_id, stage, nodes, batch, recipe_json, updated_at)"
                " VALUES (?,?,?,?,?,?) ON CONFLICT (sweep_id) DO UPDATE SET"
                " stage = excluded.stage, nodes = coalesce(excluded.nodes, nodes),"
                " batch = coalesce(excluded.batch, batch),"
                " recipe_json = coalesce(excluded.recipe_json, recipe_json),"
                " updated_at = excluded.updated_at",
                (campaign_id, carried.stage, carried.nodes, carried.batch, recipe, now_sql()))
            await self._base.event(conn, campaign_id, "decision",
                                   f"stage {carried.stage}: sweep {child} started",
                                   rule="campaign.stage_started")
            await self._base.event(conn, child, "decision",
                                   f"stage {carried.stage} of campaign {campaign_id}",
                                   rule="campaign.child")
        return child, True

    async def get(self, sweep_id: int) -> CampaignRow | None:
        rows = await self._base.rows("SELECT * FROM campaigns WHERE sweep_id = ?", (sweep_id,))
        return CampaignRow.from_row(rows[0]) if rows else None

    async def children(self, campaign_id: int) -> list[ChildRow]:
        """The campaign's stage sweeps, in the order they were started."""
        rows = await self._base.rows("SELECT * FROM campaign_children WHERE campaign_id = ?"
                                     " ORDER BY child_id", (campaign_id,))
        return [ChildRow.from_row(r) for r in rows]

    async def parent_of(self, sweep_id: int) -> ChildRow | None:
        """The link of a stage's sweep to its campaign (None: not a stage of one)."""
        rows = await self._base.rows("SELECT * FROM campaign_children WHERE child_id = ?",
                                     (sweep_id,))
        return ChildRow.from_row(rows[0]) if rows else None

    async def due(self) -> set[int]:
        """Running campaigns whose latest stage sweep has ended, or has stopped to ask since
        the campaign last changed state: each needs its next step planned."""
        rows = await self._base.rows(
            "SELECT c.campaign_id FROM campaign_children c"
            " JOIN sweeps p ON p.id = c.campaign_id JOIN sweeps s ON s.id = c.child_id"
            " WHERE p.state = ? AND c.child_id = (SELECT max(child_id) FROM campaign_children"
            "  WHERE campaign_id = c.campaign_id)"
            " AND (s.state IN (?,?,?) OR (s.state = ? AND"
            # Which changed state last, by the transitions' event ids: two transitions in
            # the same millisecond share an updated_at (a resume read as a new stop).
            "  (SELECT max(id) FROM events WHERE sweep_id = s.id AND kind = 'transition') >"
            "  (SELECT max(id) FROM events WHERE sweep_id = p.id AND kind = 'transition')))",
            (SweepState.RUNNING, SweepState.DONE, SweepState.FAILED, SweepState.ABORTED,
             SweepState.AWAITING_DECISION))
        return {int(r[0]) for r in rows}
