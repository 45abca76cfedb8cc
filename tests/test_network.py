"""Network health sweeps: the planner over recorded runs, and whole sweeps on the simulated
cluster with a known bad link and a known slow NIC."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import Finished, GatherError, SweepContext
from sweepd.kinds.network.plan import NetworkFacts, gather, plan
from sweepd.kinds.network.rules import CONFIRM
from sweepd.kinds.network.spec import NetworkSpec
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_outcome
from sweepd.store.rows import Expected, Run, RunParams
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.simrun import NODES, open_store, run, sim_config, write_scenario

# 8 trainers start at once on a shared 2-core machine: at time_scale 0.002 the default
# 600 s hang limit is 1.2 s of wall time, less than a loaded interpreter needs to start.
HANG_S = 5000


def _ctx(runs: list[Run], node_perf: Mapping[str, Any] | None = None
         ) -> SweepContext[NetworkFacts]:
    return SweepContext(runs=runs, nodes=expand_nodes(NODES), gpu_memory_gib=192,
                        facts=NetworkFacts(node_perf=node_perf))


def _run(i: int, nodes: str, tgs: float | None, state: str = "passed") -> Run:
    return Run(id=i, sweep_id=1, seq=i, label=f"t{i}", params_json="{}", nodes=nodes,
               state=RunState(state), outcome="pass" if tgs else None, tgs=tgs, mfu=None,
               failure_class=None, detail=None, not_before=None)


def _spec(**extra: object) -> NetworkSpec:
    spec = parse_spec({"kind": "network", "nodes": NODES, **extra})
    assert isinstance(spec, NetworkSpec)
    return spec


def test_spec_needs_two_nodes() -> None:
    with pytest.raises(SpecError):
        parse_spec({"kind": "network", "nodes": "chi2832"})
    assert parse_spec({"kind": "network", "nodes": NODES}).steps == 15


def test_planner_waits_for_the_wave_and_takes_the_reference_from_node_perf() -> None:
    spec = _spec()
    perf = {"sweep": 4, "median": 1225.0, "status": {"chi2868": "healthy"},
            "delta": {"chi2868": 0.001}}
    first = plan(spec, _ctx([], node_perf=perf))
    assert isinstance(first, list) and len(first) == 1
    assert list(first[0].nodes) == expand_nodes(NODES)
    params = first[0].params
    assert params.overrides == {"dataset_type": "synthetic"} and params.expected is not None
    assert params == RunParams(overrides=params.overrides,
                               expected=Expected(tgs=1225.0, source=params.expected.source))
    # The reference names where it came from: node perf sweep 4's median.
    check_golden(GOLDEN / "network" / "expected_from_node_perf.txt",
                 params.expected.source + "\n")
    whole = _run(1, NODES, 1225 * 0.97 ** 3)  # as expected for 8 nodes: done, healthy
    done = plan(spec, _ctx([whole], node_perf=perf))
    assert isinstance(done, Finished) and done.verdict["faults"] == []
    assert done.verdict["expected_source"].startswith("node perf sweep 4")
    # Degraded whole: both halves go out together; none again while they run.
    slow = _run(1, NODES, 1000.0)
    halves = plan(spec, _ctx([slow], node_perf=perf))
    assert isinstance(halves, list) and len(halves) == 2
    running = [_run(2, "chi[2832,2863,2867-2868]", None, "active")]
    rest = plan(spec, _ctx([slow, *running], node_perf=perf))
    assert isinstance(rest, list) and [list(r.nodes) for r in rest] == \
        [["chi2870", "chi2872", "chi2880", "chi2881"]]


def _recorded(i: int, nodes: str, tgs: float | None, ref: float | None) -> Run:
    run = _run(i, nodes, tgs)
    params = RunParams(overrides={"dataset_type": "synthetic"},
                       expected=Expected(tgs=ref, source=f"recorded {ref}"))
    return replace(run, params_json=params.to_json())


def test_the_reference_is_the_one_recorded_with_the_first_run() -> None:
    # A node perf sweep that finishes mid-sweep (median 2000) must not re-judge the groups
    # already run against 1225: the replay would ask for other groups than those it ran.
    spec = _spec()
    late = {"sweep": 9, "median": 2000.0, "status": {}, "delta": {}}
    whole = _recorded(1, NODES, 1225 * 0.97 ** 3, 1225.0)
    done = plan(spec, _ctx([whole], node_perf=late))
    assert isinstance(done, Finished) and done.verdict["faults"] == []
    assert done.verdict["expected_source"] == "recorded 1225.0"


def test_an_unresolved_pair_keeps_both_nodes_out_of_the_usable_list() -> None:
    spec = parse_spec({"kind": "network", "nodes": "chi[2832,2863]", "expected_tgs": 1225})
    assert isinstance(spec, NetworkSpec)
    ctx = SweepContext(runs=[_recorded(1, "chi[2832,2863]", 900.0, 1225.0)],
                       nodes=["chi2832", "chi2863"], gpu_memory_gib=192,
                       facts=NetworkFacts())
    done = plan(spec, ctx)
    assert isinstance(done, Finished)
    assert [f["kind"] for f in done.verdict["faults"]] == ["pair"]
    assert done.verdict["suspects"] == ["chi2832", "chi2863"] and done.verdict["healthy"] == ""
    assert "could not tell which is bad" in done.verdict["recommendation"]


def test_without_a_reference_a_clean_verdict_says_what_it_cannot_see() -> None:
    spec = _spec()
    runs = [_recorded(1, NODES, 1000.0, None),
            _recorded(2, "chi[2832,2863,2867-2868]", 1030.0, None),
            _recorded(3, "chi[2870,2872,2880-2881]", 1030.0, None)]
    done = plan(spec, _ctx(runs))
    assert isinstance(done, Finished) and done.verdict["faults"] == []
    assert not done.verdict["absolute"]
    check_golden(GOLDEN / "network" / "recommendation_without_expected_tgs.txt",
                 done.verdict["recommendation"] + "\n")


async def test_an_unknown_node_perf_sweep_is_a_gather_error(store: Store) -> None:
    with pytest.raises(GatherError, match="node_perf_sweep 9 does not exist"):
        await gather(store, _spec(node_perf_sweep=9))


async def test_sim_sweep_isolates_a_bad_link_between_the_halves(tmp_path: Path) -> None:
    # chi2832 and chi2881 sit in different halves: plain halving sees two healthy halves.
    scenario = write_scenario(tmp_path, links=[{"a": "chi2832", "b": "chi2881",
                                                "factor": 0.88}])
    truth = true_outcome(load_scenario(scenario), "llama2-70b", ["chi2832"],
                         {"steps": "15"}, {}, None).tgs
    config = sim_config(tmp_path, scenario, hang_timeout_s=HANG_S)
    code, lines = await run(config, {"kind": "network", "nodes": NODES, "expected_tgs": truth})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.state == SweepState.DONE and sweep.verdict is not None
        faults = sweep.verdict["faults"]
        assert [(f["kind"], sorted(f["nodes"])) for f in faults] == \
            [("link", ["chi2832", "chi2881"])]
        tests = sweep.verdict["tests"]
        assert tests[0]["role"] == "whole" and tests[0]["status"] == "DEGRADED"
        assert [t["status"] for t in tests if t["role"] == "half"] == ["healthy", "healthy"]
        assert sweep.verdict["rounds"] <= 3 + 3
        text = "\n".join(lines)
        assert "exclude chi2881" in text
        said = {"diagnosis": faults[0]["diagnosis"]}
        said |= {f"report: {line.split()[0]}": line for line in text.splitlines()
                 if line.startswith(("| Group |", "Verdict:"))}
        check_golden_cases(GOLDEN / "network" / "bad_link.txt", said)
    finally:
        await store.close()


async def test_sim_node_perf_then_network_names_the_slow_nic(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, nodes={"chi2867": {"nic_speed": 0.9}})
    config = sim_config(tmp_path, scenario, hang_timeout_s=HANG_S)
    code, _ = await run(config, {"kind": "node-perf", "nodes": NODES})
    assert code == EXIT_VERDICT
    code, lines = await run(config, {"kind": "network", "nodes": NODES})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        perf, net = await store.sweeps.all()
        assert perf.verdict is not None and net.verdict is not None
        assert all(n["status"] == "healthy" for n in perf.verdict["nodes"])  # compute is fine
        faults = net.verdict["faults"]
        assert [(f["kind"], f["nodes"]) for f in faults] == [("node", ["chi2867"])]
        check_golden(GOLDEN / "network" / "slow_nic_diagnosis.txt", faults[0]["diagnosis"] + "\n")
        assert net.verdict["exclude"] == ["chi2867"]
        assert "chi2867" not in expand_nodes(net.verdict["healthy"])
        assert any("confirm" in line and "chi2867" in line for line in lines)
        # The pairing is recorded under its rule, with the run it planned: chi2867 beside
        # a node the search had cleared.
        confirms = [e for e in await store.events.of_sweep(net.id)
                    if e.rule == CONFIRM.id]
        assert confirms and all(e.run_id is not None for e in confirms)
        paired = {r.id: r.nodes for r in await store.runs.of_sweep(net.id)}
        assert any("chi2867" in expand_nodes(paired[e.run_id or 0])
                   and len(expand_nodes(paired[e.run_id or 0])) == 2 for e in confirms)
    finally:
        await store.close()


# -- failure-only: the SKILL.md's `-- steps=1` (issue 23 item 7) ----------------------------

def test_steps_1_is_the_failure_only_mode_of_a_network_sweep_only() -> None:
    spec = parse_spec({"kind": "network", "nodes": NODES, "steps": 1})
    assert isinstance(spec, NetworkSpec) and spec.failure_only
    assert spec.default_name().endswith("(failure-only)")
    assert not _spec().failure_only                 # the default 15 steps measure TGS
    with pytest.raises(SpecError, match="steps must reach the steady window"):
        parse_spec({"kind": "node-perf", "nodes": NODES, "steps": 1})


async def test_failure_only_passes_a_slow_link_and_says_it_cannot_see_one(
        tmp_path: Path) -> None:
    """steps=1 measures no TGS: the whole group trains, so the sweep ends at once with no
    fault, and says that a slow link needs the steady window."""
    scenario = write_scenario(tmp_path, links=[{"a": "chi2832", "b": "chi2881",
                                                "factor": 0.88}])
    config = sim_config(tmp_path, scenario, hang_timeout_s=HANG_S)
    code, lines = await run(config, {"kind": "network", "nodes": NODES, "steps": 1})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.verdict is not None and sweep.verdict["faults"] == []
        assert sweep.verdict["failure_only"] and sweep.verdict["jobs"] == 1
        assert sweep.reason is not None
        check_golden(GOLDEN / "network" / "failure_only_reason.txt", sweep.reason + "\n")
        jobs = await store.jobs.of_sweep(sweep.id)
        assert len(jobs) == 1 and jobs[0].state == "done"
        assert "trained (not measured)" in "\n".join(lines)
    finally:
        await store.close()


def test_failure_only_judges_groups_by_failing_not_by_tgs() -> None:
    """steps=1: a group that ran (no TGS) is healthy, one whose job failed is degraded,
    and the search narrows the failing groups as it does slow ones."""
    spec = _spec(steps=1)
    first = plan(spec, _ctx([]))
    assert isinstance(first, list) and len(first) == 1
    assert "failure-only (steps=1)" in first[0].reason
    trained = plan(spec, _ctx([_run(1, NODES, None)]))          # passed, nothing measured
    assert isinstance(trained, Finished) and trained.verdict["faults"] == []
    assert trained.verdict["absolute"] and trained.verdict["tests"][0]["tgs"] is None
    check_golden(GOLDEN / "network" / "failure_only_summary.txt", trained.summary + "\n")
    failed = _run(1, NODES, None, "failed")
    halves = plan(spec, _ctx([failed]))
    assert isinstance(halves, list) and sorted(len(r.nodes) for r in halves) == [4, 4]
    good, bad = "chi[2832,2863,2867-2868]", "chi[2870,2872,2880-2881]"
    deeper = plan(spec, _ctx([failed, _run(2, good, None), _run(3, bad, None, "failed")]))
    assert isinstance(deeper, list) and deeper
    assert all(set(r.nodes) & set(expand_nodes(bad)) for r in deeper)
