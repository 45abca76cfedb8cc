"""A kind's gather signals what it could not find by raising GatherError: a submission is
refused with it, and a sweep already running ends failed with it (rule and reason kept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.daemon import open_parts
from sweepd.core.states import SweepState
from sweepd.kinds.registry import parse_spec
from sweepd.kinds.spec import SpecError
from tests.simrun import NODES, sim_config, write_scenario

SPEC = {"kind": "network", "nodes": NODES, "node_perf_sweep": 999}


async def test_a_gather_error_refuses_the_submission(tmp_path: Path) -> None:
    async with open_parts(sim_config(tmp_path, write_scenario(tmp_path))) as parts:
        with pytest.raises(SpecError, match="node_perf_sweep 999 does not exist"):
            await parts.service.submit(SPEC)
        assert await parts.store.sweeps() == []


async def test_a_gather_error_in_flight_ends_the_sweep_failed_with_it(tmp_path: Path) -> None:
    async with open_parts(sim_config(tmp_path, write_scenario(tmp_path))) as parts:
        # Accepted once (the sweep it named existed then), recorded as the store keeps it.
        spec = parse_spec(SPEC).model_dump(mode="json")
        sweep_id = await parts.store.create_sweep("network", "net", spec, None)
        await parts.engine.step()
        sweep = await parts.store.sweep(sweep_id)
    assert sweep.state == SweepState.FAILED
    assert sweep.reason == "network cannot plan: node_perf_sweep 999 does not exist"
