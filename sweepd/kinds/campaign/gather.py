"""What a campaign's planner needs from the store: its stages' sweeps and each finished
stage's typed result, read through the stage kind's `exports` (never its verdict's keys);
batch, flags and confirm by the parallelism they ran at (a cell)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sweepd.kinds.campaign.confirm import Confirmed
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.spent import spent_hours
from sweepd.kinds.model_perf.exports import Optimum, optimum_of
from sweepd.kinds.network.exports import NetworkVerdict, network_verdict
from sweepd.kinds.node_perf.exports import NodeVerdicts, node_verdicts
from sweepd.kinds.xla_tuning.exports import Recipe, recipe_of
from sweepd.store.states import SweepState

if TYPE_CHECKING:
    from sweepd.kinds.registry import GatherContext
    from sweepd.store.rows import Job
    from sweepd.store.store import Store

NAME = "campaign"


@dataclass(frozen=True)
class Child:
    """A stage's sweep as it is now."""

    id: int
    stage: str
    state: SweepState
    reason: str | None


@dataclass(frozen=True)
class Cell:
    """What the stages of one parallelism found: the batch, the recipe, the claim."""

    batch: Optimum | None = None
    flags: Recipe | None = None
    confirm: Confirmed | None = None


@dataclass(frozen=True)
class CampaignFacts:
    children: Mapping[str, Child] = field(default_factory=dict)   # by stage key
    health: NodeVerdicts | None = None
    cells: Mapping[str, Cell] = field(default_factory=dict)       # by parallelism
    # Hours the stages' jobs have taken so far on the cluster's clock, the first one's start
    # to the last one's end (`spent.spent_hours`).
    spent_hours: float = 0.0
    network: NetworkVerdict | None = None   # node health's multi-node check

    def cell(self, par: str) -> Cell:
        return self.cells.get(par, Cell())


def confirmed_of(verdict: Mapping[str, object] | None) -> Confirmed | None:
    found = (verdict or {}).get("confirmed")
    return Confirmed.from_dict(found) if isinstance(found, dict) else None


async def gather(store: Store, spec: CampaignSpec, where: GatherContext) -> CampaignFacts:
    if where.sweep is None or spec.runs_itself:
        return CampaignFacts()   # a submission, or a confirm stage that runs itself
    children: dict[str, Child] = {}
    health, network = None, None
    cells: dict[str, Cell] = {}
    jobs: list[Job] = []
    for link in await store.campaigns.children(where.sweep):
        sweep = await store.sweeps.get(link.child_id)
        children[link.stage] = Child(sweep.id, link.stage, sweep.state, sweep.reason)
        jobs += await store.jobs.of_sweep(sweep.id)
        if sweep.state != SweepState.DONE:
            continue
        stage, par = spec.cell_of(link.stage)
        cell = cells.get(par or "", Cell())
        if stage == "health":
            health = node_verdicts(sweep)
        elif stage == "network":
            network = network_verdict(sweep)
        elif stage == "batch":
            cells[par or ""] = replace(cell, batch=optimum_of(sweep))
        elif stage == "flags":
            cells[par or ""] = replace(cell, flags=await recipe_of(store, sweep))
        elif stage == "confirm" and sweep.kind == NAME:
            cells[par or ""] = replace(cell, confirm=confirmed_of(sweep.verdict))
    return CampaignFacts(children, health, cells, spent_hours(jobs), network)
