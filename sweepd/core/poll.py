"""Asking the scheduler, once per pass when due: every active job's state in one call, the
submissions in flight reconciled, the stray-job check at its cadence, and the controller's
absence or return told to the outage tracker. The pass (core/engine.py) says when to ask;
this is what one asking does, and what follows from the answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sweepd.clusters.base import ControllerUnreachable, JobStatus
from sweepd.core.control import apply_stop
from sweepd.core.strays import StrayEffects
from sweepd.core.submit import apply
from sweepd.store.rows import Job
from sweepd.store.states import JobState

if TYPE_CHECKING:
    from sweepd.core.outage import ControllerOutage, OutageEffects
    from sweepd.core.parts import EngineParts
    from sweepd.core.strays import Strays
    from sweepd.core.submit import Submitter

    class Poller(EngineParts, Protocol):
        """What polling needs of the engine beyond its parts."""

        outage: ControllerOutage
        strays: Strays
        submitter: Submitter


@dataclass
class PollClock:
    """When the scheduler was last asked (cluster seconds), and the jobs whose log said
    "done" that were polled at once for it (then they wait for the normal cadence: their
    scheduler state may stay COMPLETING for a while)."""

    last: float = 0.0
    early_polled: set[int] = field(default_factory=set)


async def poll(engine: Poller, clock: PollClock,
               jobs: Sequence[Job]) -> dict[str, JobStatus] | None:
    """Scheduler states in one call, when due ({}: not due). None: controller down (wait)."""
    await engine.outage.load()
    now = engine.clock.now()
    # One loop over the jobs, not four comprehensions: it runs every pass, over thousands.
    submitting_state = JobState.SUBMITTING
    submitting: list[Job] = []
    ended: set[int] = set()   # the jobs whose log said "done"
    for j in jobs:
        if j.summary_status:
            ended.add(j.id)
        if j.state == submitting_state:
            submitting.append(j)
    down = engine.outage.down
    if clock.early_polled:   # those no longer active are forgotten
        clock.early_polled &= {j.id for j in jobs}
    early = ended - clock.early_polled
    due = now - clock.last >= engine.config.policy.poll_interval_s or (
        bool(early) and not down)
    if not due and (down or not submitting):
        return None if down else {}
    ids = [j.backend_id for j in jobs if j.backend_id]
    try:
        statuses = await engine.backend.poll(ids) if ids and due else {}
        for job in submitting:
            await apply(engine, await engine.submitter.reconcile(job, now))
        asked = bool(ids and due) or bool(submitting)
        if due and (not asked or engine.strays.due(now)):
            await check_strays(engine, now)   # also the probe while the controller is away
            asked = True
    except ControllerUnreachable as e:
        clock.last = now   # the next try at the normal cadence
        await controller_down(engine, str(e))
        return None
    if due:
        clock.last = now
        clock.early_polled |= early
    if asked:   # the answer came now, not when the call began (it may have waited)
        await outage_effects(engine, await engine.outage.contact(engine.clock.now()))
    return statuses


async def check_strays(engine: Poller, now: float) -> None:
    effects = StrayEffects()
    try:
        await engine.strays.check(now, effects)
    finally:   # what was found before a failed call is acted on all the same
        for backend_id in effects.cancel_later:
            engine.cancel_later(backend_id)
        if effects.notify:
            engine.notify()


async def controller_down(engine: Poller, why: str) -> None:
    await outage_effects(engine, await engine.outage.gone(why))


async def outage_effects(engine: Poller, effects: OutageEffects) -> None:
    if effects.notify:
        engine.notify()
    for stop in effects.stops:
        await apply_stop(engine, stop)
