"""What a campaign's stages found, as the later stages, the summary and the verdict use it
(pure): the healthy and frozen nodes, the excluded nodes with their evidence, each
parallelism's candidate, the campaign's summary line and its verdict."""

from __future__ import annotations

from typing import Any

from sweepd.kinds.campaign.gather import CampaignFacts, Cell
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.store.states import SweepState
from sweepd.util.hostlists import collect_nodes

HEALTHY = ("healthy", "marginal")   # node perf's bands a campaign keeps


def healthy_nodes(spec: CampaignSpec, facts: CampaignFacts) -> list[str]:
    """The slot's nodes node perf and the network check kept, in the slot's order."""
    nodes = spec.node_list
    if facts.health is not None:
        nodes = [n for n in nodes if facts.health.status.get(n) in HEALTHY]
    if facts.network is not None:
        nodes = [n for n in nodes if n not in facts.network.excluded]
    return nodes


def frozen_nodes(spec: CampaignSpec, facts: CampaignFacts,
                 par: str | None = None) -> list[str] | None:
    """The nodes every later stage of a parallelism (default: the largest) runs on: the
    first healthy ones it needs, in the slot's order (the rest are spares). None: too few
    healthy nodes for the campaign's largest parallelism."""
    nodes = healthy_nodes(spec, facts)
    if len(nodes) < spec.job_nodes:
        return None
    return nodes[:spec.nodes_of(par) if par else spec.job_nodes]


def excluded(spec: CampaignSpec, facts: CampaignFacts) -> dict[str, str]:
    """Each node the health stage left out, with its band and delta (the evidence)."""
    out: dict[str, str] = {}
    for node in spec.node_list if facts.health is not None else ():
        status = facts.health.status.get(node) if facts.health else None
        if status not in HEALTHY:
            delta = facts.health.delta.get(node) if facts.health else None
            out[node] = f"{status}" + (f" ({delta:+.1%} vs the median)"
                                       if isinstance(delta, int | float) else "")
    if facts.network is not None:
        out.update({n: f"network: {why}" for n, why in facts.network.excluded.items()
                    if n not in out})
    return out


def candidate(cell: Cell) -> dict[str, Any]:
    """A confirm stage's candidate from its parallelism's batch and flags results."""
    out: dict[str, Any] = {}
    if cell.batch is not None:
        out["batch"] = cell.batch.best
    if cell.flags is not None and cell.flags.found:
        out["xla_flags"] = list(cell.flags.xla_flags)
        out["env"] = dict(cell.flags.env)
    return out


def summary(spec: CampaignSpec, facts: CampaignFacts) -> str:
    parts = []
    if facts.health is not None:
        parts.append(f"excluded {', '.join(excluded(spec, facts)) or 'no node'}")
    for par in spec.parallelisms:
        cell, said = facts.cell(par), []
        if cell.batch is not None:
            said.append(f"batch {cell.batch.best}")
        if cell.flags is not None:
            said.append(f"recipe {' '.join(cell.flags.xla_flags)}" if cell.flags.found
                        else f"no recipe (xla-tuning {cell.flags.verdict})")
        if cell.confirm is not None:
            said.append(cell.confirm.claim)
        elif "confirm" in spec.stages and not candidate(cell) and all(
                spec.key(s, par) in facts.children for s in spec.stages
                if s in ("batch", "flags")) and spec.key("confirm", par) not in facts.children:
            said.append("nothing to confirm: the deployed configuration stays")
        if said:
            parts.append((f"{par}: " if spec.several else "") + "; ".join(said))
    return f"campaign {spec.model} {spec.shown}: " + "; ".join(parts or ["no result"])


def verdict(spec: CampaignSpec, facts: CampaignFacts) -> dict[str, Any]:
    """Each stage's result and the sweep it came from (the report, the plot and `--apply`
    read it): node health once, then a cell per parallelism (its nodes, batch, recipe and
    confirmed claim)."""
    out: dict[str, Any] = {"model": spec.model, "parallelism": spec.parallelism,
                           "stages": list(spec.stages),
                           "sweeps": {s: c.id for s, c in facts.children.items()},
                           "skipped": [s for s, c in facts.children.items()
                                       if c.state in (SweepState.ABORTED, SweepState.FAILED)],
                           # Of the budget, on the cluster's clock (`spent.spent_hours`).
                           "spent_hours": round(facts.spent_hours, 3)}
    nodes = frozen_nodes(spec, facts)
    out["nodes"] = collect_nodes(nodes) if nodes else None
    if facts.health is not None:
        out["health"] = {"median": facts.health.median, "excluded": excluded(spec, facts),
                         **({"network": facts.network.recommendation}
                            if facts.network is not None else {})}
    out["cells"] = [_cell(spec, facts, par) for par in spec.parallelisms]
    return out


def _cell(spec: CampaignSpec, facts: CampaignFacts, par: str) -> dict[str, Any]:
    cell = facts.cell(par)
    nodes = frozen_nodes(spec, facts, par)
    out: dict[str, Any] = {"parallelism": par, "nodes": collect_nodes(nodes) if nodes else None,
                           "keys": {s: spec.key(s, par) for s in spec.stages
                                    if s in ("batch", "flags", "confirm")}}
    if cell.batch is not None:
        out["batch"] = {"best": cell.batch.best, "tgs": cell.batch.tgs}
    if cell.flags is not None:
        f = cell.flags
        out["flags"] = {"verdict": f.verdict, "profile": f.profile, "xla_flags": list(f.xla_flags),
                        "env": dict(f.env), "gain": f.gain,
                        "interval": list(f.interval) if f.interval else None,
                        "baseline_tgs": f.baseline_tgs, "recipe_tgs": f.recipe_tgs}
    if cell.confirm is not None:
        out["confirmed"] = cell.confirm.as_dict()
    return out


def cells_of(v: dict[str, Any]) -> list[dict[str, Any]]:
    """A campaign verdict's cells; a verdict written before cells (one parallelism, its
    results at the top) is its own one cell."""
    cells = v.get("cells")
    if isinstance(cells, list):
        return [c for c in cells if isinstance(c, dict)]
    return [{**v, "keys": {s: s for s in ("batch", "flags", "confirm")}}] if v else []


def confirmed_cells(v: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells whose confirm runs confirmed a gain (the lower end of the interval above
    zero): the only ones `--apply` writes (nothing within noise is put forward)."""
    out = []
    for cell in cells_of(v):
        interval = (cell.get("confirmed") or {}).get("interval")
        if isinstance(interval, list) and len(interval) == 2 and float(interval[0]) > 0:
            out.append(cell)
    return out
