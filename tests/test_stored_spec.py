"""A sweep keeps the spec it was accepted with: a validator made stricter since (e.g. by an
upgrade) refuses new submissions, never a sweep already in flight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sweepd.app.daemon import open_parts
from sweepd.core.states import SweepState
from sweepd.kinds.parse import parse_spec, stored_spec
from sweepd.kinds.spec import SpecError
from tests.simrun import NODES, sim_config, write_scenario

SPEC = {"kind": "node-perf", "nodes": NODES}
ENDED = (SweepState.DONE, SweepState.FAILED, SweepState.ABORTED, SweepState.AWAITING_DECISION)


def _stricter(monkeypatch: pytest.MonkeyPatch) -> None:
    # A node perf sweep now needs more nodes than the 8 pinned: a refusal at submit.
    monkeypatch.setattr("sweepd.kinds.node_perf.spec.MIN_FOR_MEDIAN", 100)


def test_a_stored_spec_is_read_back_without_todays_validators(
        monkeypatch: pytest.MonkeyPatch) -> None:
    accepted = parse_spec(SPEC)
    stored = accepted.model_dump(mode="json")
    _stricter(monkeypatch)
    with pytest.raises(SpecError, match="cannot single out a slow one"):
        parse_spec(SPEC)
    assert stored_spec("node-perf", stored) == accepted


def test_every_kind_reads_its_stored_spec_back_equal(tmp_path: Path) -> None:
    for data in ({"kind": "model-perf", "model": "llama2-70b", "nodes": NODES}, SPEC,
                 {"kind": "network", "nodes": NODES},
                 {"kind": "model-sweep", "nodes": NODES, "commits": ["a", "b"],
                  "repo": str(tmp_path)}):
        accepted = parse_spec(data)
        assert stored_spec(data["kind"], accepted.model_dump(mode="json")) == accepted


async def test_a_sweep_in_flight_keeps_its_spec_across_a_stricter_validator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = (await parts.service.submit(SPEC))["id"]
        await parts.engine.step()   # its first jobs are submitted
    _stricter(monkeypatch)   # then the daemon is upgraded, and restarts
    async with open_parts(config) as parts:
        sweep = await parts.store.sweeps.get(sweep_id)
        while sweep.state not in ENDED:
            await parts.engine.step()
            await asyncio.sleep(config.daemon.tick_s)
            sweep = await parts.store.sweeps.get(sweep_id)
    assert sweep.state == SweepState.DONE, sweep.reason
