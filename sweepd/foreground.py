"""`sweepd run` and `sweepd demo`: one sweep in the foreground, without a daemon."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from sweepd.config import Config
from sweepd.daemon import open_parts
from sweepd.states import SweepState

# Documented exit codes of `sweepd run`, `sweepd demo` and `sweepd watch`.
EXIT_VERDICT = 0
EXIT_BAD_INPUT = 2
EXIT_AWAITING_DECISION = 3
EXIT_FAILED = 4

EXIT_FOR_STATE = {SweepState.DONE: EXIT_VERDICT, SweepState.AWAITING_DECISION:
                  EXIT_AWAITING_DECISION, SweepState.FAILED: EXIT_FAILED,
                  SweepState.ABORTED: EXIT_FAILED}


async def run_sweep(config: Config, spec: dict[str, Any], emit: Callable[[str], None],
                    resume_id: int | None = None) -> int:
    """Submit `spec` (or pick up sweep `resume_id`) and drive it until it ends or stops."""
    async with open_parts(config) as parts:
        engine, service = parts.engine, parts.service
        sweep_id = resume_id or int((await service.submit(spec))["id"])
        emit(f"sweep {sweep_id} submitted; state in {config.daemon.state_dir}")
        seen = 0
        while True:
            await engine.step()
            for event in await parts.store.events(sweep_id, seen, kind="progress"):
                emit(event.reason)
                seen = event.id
            state = (await parts.store.sweep(sweep_id)).state
            if state in EXIT_FOR_STATE:
                break
            engine.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.changed.wait(), config.daemon.tick_s)
        report = await service.report(sweep_id)
        emit("")
        emit(str(report["markdown"]))
        # No daemon knows this sweep: say where it is, for `report`, `explain` or `--apply`.
        emit(f"(sweep {sweep_id} is in {config.daemon.state_dir}: a daemon started with "
             "that daemon.state_dir serves it to `sweepd report` and `sweepd explain`)")
        return EXIT_FOR_STATE[state]


async def sim_truth_line(config: Config) -> str:
    """What the simulator knows and the sweep had to find out: its true optimum on the
    nodes the sweep ended up using (for the demo's last line)."""
    from sweepd.clusters.factory import default_scenario
    from sweepd.sim.scenario import load_scenario
    from sweepd.sim.truth import true_outcome, true_peak_batch
    from sweepd.specs import expand_nodes
    from sweepd.store.store import Store

    store = await Store.open(config.daemon.db_path)
    try:
        sweep = (await store.sweeps())[-1]
        jobs = await store.jobs(sweep.id)
    finally:
        await store.close()
    if not jobs:
        return "(no job ran)"
    nodes = expand_nodes(jobs[-1].nodes)
    scenario = load_scenario(config.cluster.sim.scenario or default_scenario())
    peak = true_peak_batch(scenario, sweep.spec["model"], nodes)
    tgs = true_outcome(scenario, sweep.spec["model"], nodes,
                       {"per_device_batch_size": str(peak)}, {}, None).tgs
    return (f"simulator's ground truth on the {len(nodes)} nodes used: peak at "
            f"per_device_batch_size={peak} ({tgs:,.0f} TGS/device without noise)")
