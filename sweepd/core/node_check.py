"""Before submitting to pinned nodes: are they usable? The xla-tuning SKILL.md's rule for
a drained or down node: try RESUME where sweepd is allowed to, otherwise stop and say why.
The pinned list is never silently changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sweepd.clusters.base import NOT_IN_CLUSTER, UNUSABLE
from sweepd.core.control import stop_sweep
from sweepd.core.node_evidence import record_evidence
from sweepd.store.rows import Sweep
from sweepd.util.text import compact_nodes

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

__all__ = ["UNUSABLE", "ensure_usable", "resume_where_allowed", "stop_unusable", "unusable"]


async def unusable(engine: EngineParts, nodes: Sequence[str]) -> dict[str, str]:
    states = await engine.backend.node_states(nodes)
    return {n: s for n, s in states.items() if s in UNUSABLE}


async def ensure_usable(engine: EngineParts, sweep: Sweep, nodes: Sequence[str]) -> bool:
    """True when every node can take the job; otherwise the sweep is stopped."""
    bad = await unusable(engine, nodes)
    if not bad:
        return True
    still, tried = await resume_where_allowed(engine, sweep, bad)
    if not still:
        return True
    await stop_unusable(engine, sweep, still, tried)
    return False


async def resume_where_allowed(engine: EngineParts, sweep: Sweep, bad: dict[str, str]
                               ) -> tuple[dict[str, str], list[str]]:
    """RESUME each node where sweepd may; (the nodes still unusable, what was tried)."""
    tried = []
    for node, state in sorted(bad.items()):
        if state == NOT_IN_CLUSTER:
            tried.append(f"{node} is not a node of this cluster (a typo in `nodes`?)")
            continue   # nothing to resume
        try:
            await engine.backend.resume_node(node)
        except PermissionError as e:
            tried.append(f"{node} not resumed ({e})")
            continue
        tried.append(f"{node} resumed from {state}")
        await engine.store.events.add(sweep.id, "decision", f"{node} was {state}: RESUME",
                                            rule="node.resume", evidence=f"sinfo: {node} {state}")
    return await unusable(engine, sorted(bad)), tried


async def stop_unusable(engine: EngineParts, sweep: Sweep, still: dict[str, str],
                        tried: Sequence[str], *, waiting: str | None = None) -> None:
    """Stop for a person, naming the nodes; `waiting`: the queued job that waits for them
    (its scheduler reason is evidence too)."""
    by_state: dict[str, list[str]] = {}
    for node, state in sorted(still.items()):
        by_state.setdefault(state, []).append(node)
    listed = ", ".join(f"{compact_nodes(ns)} ({s})" for s, ns in sorted(by_state.items()))
    evidence = "; ".join(f"sinfo: {n} {s}" for n, s in sorted(still.items()))
    reason = f"pinned node(s) not usable: {listed}"
    if waiting:
        reason, evidence = f"{reason}; {waiting}", f"{evidence}; {waiting}"
    await record_evidence(engine, sweep.id, sorted(still))   # stored first: the stop reads it
    await stop_sweep(engine, sweep, reason, rule="node.unusable", evidence=evidence,
                     failing_nodes=sorted(still), recovery="; ".join(tried),
                     outcome="still not usable; the pinned list is not changed silently")
