"""The daemon's engine loop runs a pass at once after a change (a submit, a resume), not
only at the next tick; a sweep's own marks during a pass cost no extra pass."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from sweepd.app.daemon import engine_loop, open_parts
from sweepd.core.engine import Engine
from sweepd.store.store import Store
from tests.simrun import perf_spec, sim_config, write_scenario

NEVER_S = 3600.0   # a tick that never comes within the test


async def _first_job(store: Store, sweep_id: int) -> None:
    while not await store.jobs.of_sweep(sweep_id):
        await asyncio.sleep(0.01)


async def test_a_submit_is_planned_at_once_not_at_the_next_tick(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        stop = asyncio.Event()
        loop = asyncio.create_task(engine_loop(parts.engine, stop, NEVER_S))
        try:
            await asyncio.sleep(0)   # the loop's first pass, then it waits for a tick
            sweep_id = (await parts.service.submit(perf_spec()))["id"]
            await asyncio.wait_for(_first_job(parts.store, sweep_id), 60)
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await loop


def _engine_marks(engine: Engine, planning: bool) -> bool:
    engine.changed.clear()
    engine._planning = planning
    engine.mark(1)
    return engine.changed.is_set()


async def test_a_mark_wakes_the_loop_unless_the_pass_under_way_will_plan_it(
        tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        assert _engine_marks(parts.engine, planning=False)      # a resume between passes
        assert not _engine_marks(parts.engine, planning=True)   # a job concluded in this pass
        await parts.engine.step()
        assert not parts.engine._planning
