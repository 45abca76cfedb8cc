"""A kind's gather signals what it could not find by raising GatherError: a submission is
refused with it, and a sweep already running ends failed with it (rule and reason kept)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from sweepd.app.daemon import open_parts
from sweepd.core.states import SweepState
from sweepd.kinds.model_perf.kind import gather as model_perf_gather
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import NODES, sim_config, write_scenario

SPEC = {"kind": "network", "nodes": NODES, "node_perf_sweep": 999}


async def test_a_gather_error_refuses_the_submission(tmp_path: Path) -> None:
    async with open_parts(sim_config(tmp_path, write_scenario(tmp_path))) as parts:
        with pytest.raises(SpecError, match="node_perf_sweep 999 does not exist"):
            await parts.service.submit(SPEC)
        assert await parts.store.sweeps.all() == []


async def test_a_gather_error_in_flight_ends_the_sweep_failed_with_it(tmp_path: Path) -> None:
    async with open_parts(sim_config(tmp_path, write_scenario(tmp_path))) as parts:
        # Accepted once (the sweep it named existed then), recorded as the store keeps it.
        spec = parse_spec(SPEC).model_dump(mode="json")
        sweep_id = await parts.store.sweeps.create("network", "net", spec, None)
        await parts.engine.step()
        sweep = await parts.store.sweeps.get(sweep_id)
    assert sweep.state == SweepState.FAILED
    assert sweep.reason is not None
    check_golden(GOLDEN / "gather" / "gather_error_in_flight.txt", sweep.reason + "\n")


async def test_model_perf_gather_reads_the_param_memory_of_the_same_model_on_the_same_nodes(
        store: Store) -> None:
    """The exact `Memstats` figure the memory estimate prefers to its formula: the latest job
    of the same model on exactly these nodes, from any sweep."""
    spec = cast(ModelPerfSpec, parse_spec({"kind": "model-perf", "model": "llama2-70b",
                                           "nodes": "chi[1-2]"}))
    assert (await model_perf_gather(store, spec)).param_gb is None

    async def job(model: str, nodes: str, mem: float | None) -> None:
        sweep = await store.sweeps.create("model-perf", model,
                                                {"model": model, "nodes": nodes})
        run = await store.runs.add(sweep, "r", RunParams(), nodes, "t")
        made = await store.jobs.create(run, f"tok-{sweep}", "name", nodes)
        await store.jobs.update(made.id, mem_used_gb=mem)

    await job("llama2-70b", "chi[1-2]", 41.2)
    await job("llama2-70b", "chi[1-2]", 40.5)     # the latest of the cell wins
    await job("llama2-70b", "chi[1-2]", None)     # printed nothing: passed over
    await job("llama2-70b", "chi[1-3]", 30.0)     # other nodes
    await job("mixtral-8x7b", "chi[1-2]", 20.0)   # another model
    assert (await model_perf_gather(store, spec)).param_gb == 40.5
