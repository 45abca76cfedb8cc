"""`ControllerOutage` on its own, against a real store: it writes its notes and returns
what the engine is to do (news, the sweeps to stop), and a new process's outage goes on
from the stored start."""

from __future__ import annotations

from pathlib import Path

from sweepd.core.outage import CONTROLLER_DOWN_KEY, ControllerOutage
from sweepd.core.states import SweepState
from sweepd.store.store import Store
from tests.support.clock import HandClock


async def test_an_outage_past_its_limit_returns_a_stop_per_running_sweep_and_survives_a_restart(
        tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "sweepd.db")
    try:
        running = await store.sweeps.create("model-perf", "a", {"kind": "model-perf"})
        await store.sweeps.transition(running, SweepState.RUNNING, "started")
        await store.sweeps.create("model-perf", "b", {"kind": "model-perf"})   # still queued
        clock = HandClock(1000.0)
        outage = ControllerOutage(store, clock, limit_s=600.0)
        await outage.contact(900.0)   # the last answer: the outage runs from here
        clock.t = 1000.0
        first = await outage.gone("sbatch: timed out")
        assert (first.notify, first.stops) == (True, [])
        assert [e.rule for e in await store.events.of_sweep(running) if e.kind == "note"] == [
            "controller.wait"]
        # A new process reads the outage's start from the store: 700 s > the limit.
        clock.t = 1600.0
        later = ControllerOutage(store, clock, limit_s=600.0)
        await later.load()
        assert later.since == 900.0
        past = await later.gone("sbatch: timed out")
        assert past.notify is False
        assert [(s.sweep.id, s.rule) for s in past.stops] == [(running, "controller.down_limit")]
        back = await later.contact(1700.0)
        assert (back.notify, later.down) == (True, False)
        assert await store.daemon_state.get(CONTROLLER_DOWN_KEY) is None
        assert [e.rule for e in await store.events.of_sweep(running) if e.kind == "note"] == [
            "controller.wait", "controller.back"]
    finally:
        await store.close()
