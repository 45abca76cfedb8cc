"""A spec's cluster slot resolved at submission: `partition` + `node_count` (or `node_count`
alone) becomes the idle nodes chosen now, frozen into the stored spec's `nodes`, so every
later plan and job sees the same named nodes. Which were chosen, and why, is recorded."""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.clusters.base import ClusterBackend, ControllerUnreachable
from sweepd.kinds.spec import SpecError, SweepSpec
from sweepd.util.hostlists import collect_nodes

RULE = "slot.resolved"


@dataclass(frozen=True)
class Chosen:
    """The decision to record once the sweep exists."""

    text: str
    evidence: str


def wants_slot(spec: SweepSpec) -> int | None:
    """The node count a spec asks for without naming nodes; None: it names them (or has no
    slot fields: another kind)."""
    count = getattr(spec, "node_count", None)
    return count if isinstance(count, int) and not spec.nodes else None


async def resolve(backend: ClusterBackend, spec: SweepSpec, default_partition: str | None
                  ) -> tuple[SweepSpec, Chosen | None]:
    """The spec with its slot frozen to idle nodes (the first `node_count` in name order:
    neighbours by name, and the same choice for the same cluster state), and the decision.
    Not enough idle nodes, or a scheduler that cannot say, is a refusal naming why."""
    count = wants_slot(spec)
    if count is None:
        return spec, None
    asked = getattr(spec, "partition", None)
    partition = asked or default_partition
    where = f"partition {partition}" if partition else "the cluster (no partition given)"
    try:
        listing = await backend.idle_nodes(partition)
    except (ControllerUnreachable, RuntimeError) as e:
        raise _refusal(f"cannot resolve node_count {count} now: the scheduler did not "
                       f"answer ({e})") from None
    if len(listing.items) < count:
        shown = collect_nodes(listing.items) if listing.items else "none"
        raise _refusal(f"node_count {count}: only {len(listing.items)} idle node(s) in "
                       f"{where} now ({shown}); name the nodes, or wait for them to free")
    chosen = listing.items[:count]
    nodes = collect_nodes(chosen)
    text = (f"cluster slot resolved to {nodes}: the first {count} of {len(listing.items)} "
            f"idle node(s) in {where}, by name; frozen for the sweep")
    return spec.model_copy(update={"nodes": nodes}), Chosen(text, listing.evidence)


def _refusal(what: str) -> SpecError:
    return SpecError(what, [{"loc": ["node_count"], "msg": what}])
