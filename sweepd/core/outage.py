"""Controller-outage tracking: when the scheduler stopped answering, whom that was told,
and when the outage passes its limit. Kept in the store, so a restart goes on counting.
It writes its own notes; what it asks of the engine (news, sweeps to stop) it returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import structlog

from sweepd.core.control import SweepStop
from sweepd.store.states import SweepState
from sweepd.store.store import Store
from sweepd.util.clock import Clock

log = structlog.get_logger("sweepd.core.outage")

CONTROLLER_DOWN_KEY = "controller_down_since"


@dataclass
class OutageEffects:
    """What the engine does after an outage's news: tell the clients, stop these sweeps."""

    notify: bool = False
    stops: list[SweepStop] = field(default_factory=list)


@dataclass
class ControllerOutage:
    store: Store
    clock: Clock
    limit_s: float
    since: float | None = field(default=None, init=False)
    # The last successful answer from the scheduler: an outage is measured from it.
    _last_contact: float | None = field(default=None, init=False)
    _told: set[int] = field(default_factory=set, init=False)
    _loaded: bool = field(default=False, init=False)

    @property
    def down(self) -> bool:
        return self.since is not None

    async def load(self) -> None:
        """An outage an earlier process saw begin goes on counting from its start (the
        limit too), and whom it told is told when it ends."""
        if self._loaded:
            return
        self._loaded = True
        saved = await self.store.daemon_state.get(CONTROLLER_DOWN_KEY)
        if saved is not None:
            outage = json.loads(saved)
            self.since = float(outage["since"])
            self._told = {int(i) for i in outage["told"]}

    async def contact(self, now: float) -> OutageEffects:
        """The scheduler answered at `now`: an outage, if any, is over and said so."""
        self._last_contact = now
        if self.since is None:
            return OutageEffects()
        down = now - self.since
        log.warning("controller.back", down_s=round(down, 1))
        for sweep_id in sorted(self._told):
            sweep = await self.store.sweeps.get(sweep_id)
            if sweep.state not in (SweepState.RUNNING, SweepState.AWAITING_DECISION):
                continue
            async with self.store.tx():
                await self.store.events.add(
                    sweep_id, "note", f"scheduler answers again after {down:.0f} s",
                    rule="controller.back", evidence=f"down_s: {down:.0f}")
                await self.store.events.add(
                    sweep_id, "progress", f"sweep {sweep_id}: the Slurm controller answers again"
                    f" (away {down:.0f} s)")
        self.since = None
        self._told = set()
        await self.store.daemon_state.set(CONTROLLER_DOWN_KEY, None)
        return OutageEffects(notify=True)

    async def gone(self, why: str) -> OutageEffects:
        """The scheduler did not answer. The outage runs from the last successful answer,
        not from the first failed one: that is when the scheduler may have stopped hearing
        us. Past the limit, every running sweep is to stop."""
        await self.load()
        now = self.clock.now()
        limit = self.limit_s
        effects = OutageEffects()
        if self.since is None:
            since = self._last_contact if self._last_contact is not None else now
            self.since = since
            log.warning("controller.gone", why=why, since_s=round(now - since, 1))
            for sweep in await self.store.sweeps.all([SweepState.RUNNING]):
                async with self.store.tx():
                    await self.store.events.add(
                        sweep.id, "note", f"scheduler unreachable: {why}; waiting",
                        rule="controller.wait", evidence=why)
                    await self.store.events.add(
                        sweep.id, "progress", f"sweep {sweep.id}: the Slurm controller does not "
                        f"answer (last answer {now - since:.0f} s ago): waiting up to "
                        f"{limit / 60:.0f} min")
                self._told.add(sweep.id)
            await self.store.daemon_state.set(CONTROLLER_DOWN_KEY, json.dumps(
                {"since": since, "told": sorted(self._told)}))
            effects.notify = True
        down = now - self.since
        if down < limit:
            return effects
        effects.stops = [
            SweepStop(sweep, f"Slurm controller unreachable for {down / 60:.0f} min "
                      f"(limit {limit / 60:.0f} min)", rule="controller.down_limit",
                      evidence=why, failing_nodes=[],
                      recovery="waited, asking again at the poll period",
                      outcome="controller still unreachable")
            for sweep in await self.store.sweeps.all([SweepState.RUNNING])]
        return effects
