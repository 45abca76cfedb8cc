"""The submission's gather is kept for the sweep's first plan (issue 24, "Facts once"):
gathered once for both, then anew for every later plan."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sweepd.app import admission as admission_module
from sweepd.app.daemon import open_parts
from sweepd.core import planning
from sweepd.core.gathered import KEEP_S, Gathered
from sweepd.kinds.api import SweepContext
from sweepd.kinds.registry import GatherContext, Kind, kind_of
from sweepd.store.store import Store
from tests.simrun import perf_spec, sim_config, write_scenario


def test_kept_facts_are_taken_once_and_only_while_fresh() -> None:
    kept = Gathered()
    kept.keep(1, "facts", now=100.0)
    assert kept.take(1, now=100.0 + KEEP_S) == (True, "facts")
    assert kept.take(1, now=100.0 + KEEP_S) == (False, None)      # taken: gone
    kept.keep(2, "old", now=0.0)
    assert kept.take(2, now=KEEP_S + 1.0) == (False, None)        # stale: gathered anew
    assert kept.take(3, now=0.0) == (False, None)                 # never kept


async def test_the_first_plan_takes_the_submissions_facts_and_later_plans_gather(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    real = kind_of("model-perf")
    gathered: list[Any] = []
    planned_with: list[Any] = []

    async def gather(store: Store, spec: Any, where: GatherContext) -> Any:
        facts = await real.gather(store, spec, where)
        gathered.append(facts)
        return facts

    def plan(spec: Any, ctx: SweepContext[Any]) -> Any:
        planned_with.append(ctx.facts)
        return real.plan(spec, ctx)

    counting: Kind[Any, Any] = dataclasses.replace(real, gather=gather, plan=plan)
    for module in (admission_module, planning):
        monkeypatch.setattr(module, "kind_of", lambda name: counting)
    async with open_parts(config) as parts:
        sweep_id = (await parts.service.submit(perf_spec()))["id"]
        assert len(gathered) == 1                       # the submission's check
        await parts.engine.step()                       # the sweep's first plan
        assert len(gathered) == 1 and planned_with == [gathered[0]]
        assert planned_with[0] is gathered[0]
        sweep = await parts.store.sweeps.get(sweep_id)
        await planning.plan(parts.engine, sweep, await parts.store.runs.of_sweep(sweep_id))
        assert len(gathered) == 2 and planned_with[-1] is gathered[1]
