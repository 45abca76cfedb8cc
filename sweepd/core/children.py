"""Sweeps that start sweeps (a campaign's stages): a kind's `StartSweep` made into a normal
sweep of another kind, linked to its parent in the store, and the parents due to plan again
because their latest stage's sweep ended or stopped to ask.

Nothing here names a kind: the child's spec is parsed and checked as a person's submission
is (a spec the registry refuses stops the parent with the refusal as evidence)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweepd.core.control import stop_sweep
from sweepd.kinds.api import StartSweep
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import Check, PreflightContext, gather_context, kind_of
from sweepd.kinds.spec import SpecError, SweepSpec
from sweepd.store.campaigns import Carried
from sweepd.store.rows import Sweep

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts
    from sweepd.store.store import Store


async def start_child(engine: EngineParts, parent: Sweep, decision: StartSweep) -> int | None:
    """The stage's sweep, queued and linked (its id), or the parent stopped when its spec
    is refused (None). Planning the same stage twice (a restart) finds the first one."""
    spec_data = {**decision.spec}
    chats = parent.spec.get("chats")
    if chats and "chats" not in spec_data:
        spec_data["chats"] = chats   # the stage's messages go where the campaign's go
    where = gather_context(engine.config)
    try:
        spec = parse_spec(spec_data, where.repo)
        checks = await _preflight(engine, spec)
    except SpecError as e:
        await stop_sweep(engine, parent, f"stage {decision.stage}: its sweep's spec was "
                         f"refused: {e}", rule="campaign.stage_refused", evidence=str(e),
                         failing_nodes=[], recovery="none",
                         outcome="a stage that cannot be submitted")
        return None
    name = spec.name or spec.default_name()
    carried = Carried(decision.stage, decision.nodes, decision.batch, decision.recipe)
    child, made = await engine.store.campaigns.start_child(parent.id, carried, spec.kind, name,
                                                           spec.model_dump(mode="json"),
                                                           parent.submitted_by)
    if made:
        for line in decision.progress:
            await engine.store.events.add(parent.id, "progress", line)
        for check in checks:   # as a person's submission records its pre-flight
            await engine.store.events.add(child, "decision", check.text, rule=check.rule,
                                                evidence=check.evidence)
    engine.mark(child)
    engine.notify()
    return child


async def _preflight(engine: EngineParts, spec: SweepSpec) -> list[Check]:
    """The stage kind's pre-flight, as at a person's submission (e.g. xla-tuning's
    train_env.sh and env-file checks); a failed check refuses the stage (SpecError)."""
    hook = kind_of(spec.kind).preflight
    if hook is None:
        return []
    cluster = engine.config.cluster
    partition = getattr(spec, "partition", None) or (
        cluster.slurm.partition if cluster.backend == "slurm" else None)
    checks: list[Check] = await hook(spec, PreflightContext(
        engine.backend, gather_context(engine.config), partition))
    failed = [c for c in checks if not c.ok]
    if failed:
        raise SpecError("pre-flight: " + "; ".join(c.text for c in failed))
    return checks


async def due_parents(store: Store) -> set[int]:
    """Running parents whose latest stage's sweep has ended or stopped to ask since."""
    return await store.campaigns.due()
