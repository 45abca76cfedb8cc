"""A model perf sweep never shrinks below its minimum without asking, and a resume that
would leave too few nodes is refused up front (issue 16, item 9)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION
from sweepd.core.states import SweepState
from sweepd.kinds.api import Stop, SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario
from tests.support.service import SPEC, Api, serve_service

FOUR = "chi[2832,2863,2867-2868]"


def test_min_nodes_defaults_to_more_than_half_the_pinned_nodes() -> None:
    def needed(**extra: object) -> int:
        return parse_spec({**SPEC, **extra}).needed_nodes

    assert needed() == 5                             # 8 pinned
    assert needed(nodes=FOUR) == 3
    assert needed(nodes="chi[2832,2863]") == 2
    assert needed(nodes=FOUR, min_nodes=1) == 1      # the spec's own word
    assert needed(model="grok-1") == 8               # the model's minimum


def test_the_search_stops_instead_of_running_on_too_few_nodes() -> None:
    spec = parse_spec({**SPEC, "nodes": FOUR, "values": [4, 8]})
    assert isinstance(spec, ModelPerfSpec)
    decision = plan(spec, SweepContext(runs=[], nodes=["chi2832"], gpu_memory_gib=192,
                                       facts=PerfFacts()))
    assert isinstance(decision, Stop) and decision.rule == "nodes.below_minimum"
    assert "only 1 of the 4 pinned nodes" in decision.reason
    assert plan(spec, SweepContext(runs=[], nodes=[
        "chi2832", "chi2863", "chi2867"], gpu_memory_gib=192, facts=PerfFacts())) != decision


async def test_two_node_faults_on_four_nodes_stop_and_ask(tmp_path: Path) -> None:
    faults = [{"kind": "ecc", "node": "chi2863", "times": 1},
              {"kind": "node_crash", "node": "chi2867", "times": 1}]
    config = sim_config(tmp_path, write_scenario(tmp_path, faults=faults))
    code, lines = await run(config, perf_spec(nodes=FOUR, values=[8]))
    assert code == EXIT_AWAITING_DECISION, lines
    store = await open_store(config)
    try:
        rules = [e.rule for e in await store.events.of_sweep(1)]
        assert "nodes.below_minimum" in rules
        assert not [r for r in await store.runs.of_sweep(1) if r.node_count < 3]
        # A plain resume would be refused: the stop message asks for a node back instead.
        stop = [e.reason for e in await store.events.of_sweep(1, kind="progress")
                if "STOP]" in e.reason][-1]
        assert "--readmit NODE" in stop and "[--exclude" not in stop, stop
        check_golden(GOLDEN / "node_minimum" / "stop_asks_for_a_node_back.txt",
                     next(line for line in stop.splitlines() if "--readmit" in line) + "\n")
    finally:
        await store.close()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with serve_service(tmp_path) as (service, store, sock), \
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(sock))) as http:
        yield Api(service, store, sock, http)


async def test_a_resume_leaving_too_few_nodes_is_refused(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "nodes": FOUR})
    sweep_id = int(body["id"])
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started")
    await api.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop rule")
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"exclude": ["chi[2832,2863]"]})
    assert status == 422 and body["details"][0]["loc"] == ["exclude"]
    check_golden(GOLDEN / "node_minimum" / "resume_leaving_too_few_refused.txt",
                 body["error"] + "\n")
    assert (await api.store.sweeps.get(sweep_id)).state == SweepState.AWAITING_DECISION
    assert await api.store.exclusions.of_sweep(sweep_id) == []
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"exclude": ["chi2832"]})
    assert status == 200 and body["excluded"] == ["chi2832"]
