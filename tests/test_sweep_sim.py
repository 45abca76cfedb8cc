"""Whole model perf sweeps on the simulated cluster, checked against its ground truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT, run_sweep
from sweepd.core import planning
from sweepd.core.engine import Engine
from sweepd.core.states import JobState, SweepState
from sweepd.kinds.model_perf.rules import FIRST_PROBE, LARGEST_FIT, SEARCH_MOVES
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_max_batch, true_outcome, true_peak_batch
from sweepd.store.rows import Run, Sweep
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import NODES, open_store, perf_spec, run, sim_config, write_scenario

SAID = GOLDEN / "sim_sweep"

MOVES = {r.id for r in SEARCH_MOVES}   # a run the batch search chose, by its move


async def test_full_sweep_finds_the_true_peak(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec())
    assert code == EXIT_VERDICT
    truth = true_peak_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.state == SweepState.DONE
        assert sweep.verdict is not None and sweep.verdict["best"] == truth
        runs = await store.runs.of_sweep(sweep.id)
        assert len({r.label for r in runs}) == len(runs)  # no value probed twice
        assert all(r.tgs is None or r.tgs > 0 for r in runs)
        # A progress line for every finished run, as it landed, and the table at the end.
        results = [line for line in lines if "(job " in line]
        assert len(results) == len(runs)
        assert any("← optimum" in line and f"| {truth} |" in line for line in lines)
        # No daemon knows this sweep: the last line says where its state is.
        check_golden(SAID / "where_its_state_is.txt",
                     scrubbed(lines[-1], state=config.daemon.state_dir) + "\n")
    finally:
        await store.close()


async def test_oom_above_the_cliff_is_never_retried(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    cliff = true_max_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
    code, _ = await run(config, perf_spec(values=[8, cliff + 1]))
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = {r.label: r for r in await store.runs.of_sweep(sweep.id)}
        oom = runs[f"per_device_batch_size={cliff + 1}"]
        assert (oom.outcome, oom.failure_class) == ("oom", "oom")
        jobs = [j for j in await store.jobs.of_sweep(sweep.id) if j.run_id == oom.id]
        assert len(jobs) == 1 and jobs[0].state == JobState.FAILED
        assert jobs[0].failure_detail  # the allocation size is recorded
        assert sweep.verdict is not None and sweep.verdict["best"] == 8
    finally:
        await store.close()


async def test_gpu_fault_excludes_the_node_and_retries(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hsa_error", "node": "chi2867",
                                                 "times": 1}])
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(values=[8]))
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert [e.node for e in await store.exclusions.of_sweep(sweep.id)] == ["chi2867"]
        jobs = await store.jobs.of_sweep(sweep.id)
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert jobs[0].failure_class == "gpu_hardware" and jobs[0].failure_node == "chi2867"
        assert "chi2867" not in expand_nodes(jobs[1].nodes)
        assert len(expand_nodes(jobs[1].nodes)) == 7
        decisions = [e for e in await store.events.of_sweep(sweep.id)
                     if e.rule == "fault.exclude_node"]
        assert decisions and decisions[0].evidence and "HSA_STATUS_ERROR" in decisions[0].evidence
        assert any("RETRY" in line for line in lines)
    finally:
        await store.close()


async def test_third_exclusion_stops_the_sweep(tmp_path: Path) -> None:
    faults = [{"kind": "hsa_error", "node": n, "times": 1}
              for n in ("chi2832", "chi2863", "chi2867")]
    scenario = write_scenario(tmp_path, faults=faults)
    config = sim_config(tmp_path, scenario, max_retries=5)
    code, lines = await run(config, perf_spec(values=[8]))
    assert code == EXIT_AWAITING_DECISION
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.state == SweepState.AWAITING_DECISION
        stop = [e for e in await store.events.of_sweep(sweep.id)
                if e.to_state == "awaiting_decision"]
        assert stop[0].rule in ("exclusions.max", "fault.same_error_other_nodes")
        message = "\n".join(lines)
        excluded = [e.node for e in await store.exclusions.of_sweep(sweep.id)]
        assert excluded and f"(excluded: {', '.join(excluded)})" in message
        # The stop as it is shown: why, the nodes excluded, and how to answer. Its golden is
        # the path this seeded scenario takes (the same error on a second node stops it
        # before a third exclusion); the other path's stop is held by the asserts above.
        if stop[0].rule == "fault.same_error_other_nodes":
            at = next(i for i, line in enumerate(lines) if "STOP]" in line)
            check_golden(SAID / "third_exclusion_stop.txt",
                         scrubbed("\n".join(lines[at:]), state=config.daemon.state_dir) + "\n")
    finally:
        await store.close()


async def test_an_environment_variable_can_be_swept(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    param = "_env_XLA_PYTHON_CLIENT_MEM_FRACTION"
    code, _ = await run(config, perf_spec(parameter=param, values=[0.85, 0.93],
                                          overrides={"per_device_batch_size": 8}))
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        # The trainer saw the variable: its memory pool is 192 GiB x the fraction.
        assert sorted(round(j.mem_limit_gb or 0) for j in jobs) == [163, 179]
        verdict = (await store.sweeps.get(1)).verdict
        assert verdict is not None and verdict["parameter"] == param
    finally:
        await store.close()


async def test_a_node_the_cluster_does_not_have_stops_with_that_said(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    spec = perf_spec(nodes="chi[2832,9999]", values=[4])
    with pytest.raises(SpecError, match="not nodes of this cluster: chi9999"):
        await run(config, spec)   # refused at submit
    # A node that left the cluster after its sweep was accepted: the sweep stops, saying so.
    store = await open_store(config)
    try:
        sid = await store.sweeps.create("model-perf", "left", parse_spec(spec).model_dump())
    finally:
        await store.close()
    lines: list[str] = []
    code = await run_sweep(config, {}, lines.append, resume_id=sid)
    assert code == EXIT_AWAITING_DECISION   # the pinned list is never changed silently
    text = "\n".join(lines)
    assert "chi2832" not in text.split("not usable:")[1].split("\n")[0]
    store = await open_store(config)
    try:
        stop = [e for e in await store.events.of_sweep(sid) if e.to_state == "awaiting_decision"]
    finally:
        await store.close()
    assert [(e.rule, e.evidence) for e in stop] == [("node.unusable",
                                                     "sinfo: chi9999 not in cluster")]
    at = next(i for i, line in enumerate(lines) if "STOP]" in line)
    check_golden(SAID / "node_left_the_cluster.txt",
                 scrubbed("\n".join(lines[at:]), state=config.daemon.state_dir) + "\n")


async def test_a_value_run_again_after_an_exclusion_gets_its_own_run(tmp_path: Path) -> None:
    """Batch 10 faults on one node: the search starts over on the 3 nodes left and runs
    values it had run on 4 again, each as a run of its own."""
    # Two searches, one after the other: at half the usual time scale (no hang to time).
    scenario = write_scenario(tmp_path, [{"kind": "hsa_error", "node": "chi2863", "batch": 10}],
                              time_scale=0.001)
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(nodes="chi[2832,2863,2867-2868]"))
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = await store.runs.of_sweep(sweep.id)
        again = [r for r in runs if r.label.endswith(" on 3N")]
        assert again and all(r.nodes == "chi[2832,2867-2868]" for r in again)
        assert sweep.verdict is not None and sweep.verdict["nodes"] == 3
    finally:
        await store.close()


async def test_a_defect_in_planning_stops_that_sweep_not_the_daemon(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    defect = ValueError("a planner's defect")

    async def broken(engine: Engine, sweep: Sweep, runs: list[Run]) -> None:
        raise defect

    monkeypatch.setattr(planning, "plan", broken)
    config = sim_config(tmp_path, write_scenario(tmp_path))
    code, lines = await run(config, perf_spec(values=[4]))
    assert code == EXIT_AWAITING_DECISION, lines
    store = await open_store(config)
    try:
        stop = [e for e in await store.events.of_sweep(1) if e.to_state == "awaiting_decision"]
        assert [e.rule for e in stop] == ["engine.plan_failed"]
        assert stop[0].evidence == repr(defect)
    finally:
        await store.close()


async def test_the_memory_line_predicts_the_cliff_and_the_search_refines_to_the_peak(
        tmp_path: Path) -> None:
    """The SKILL.md formula is ~3x low here (max ~5 on 8 nodes, truly 18): the first run's
    compiled-memory line predicts the largest batch that fits, the search goes there in one
    jump, and refines to the simulator's true integer peak in at most 5 runs."""
    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    truth = load_scenario(scenario)
    nodes = expand_nodes(NODES)
    code, _ = await run(config, perf_spec())
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = await store.runs.of_sweep(sweep.id)
        batches = [r.params.overrides["per_device_batch_size"] for r in runs]
        jobs = await store.jobs.of_sweep(sweep.id)
        moves = {e.run_id: e.rule for e in await store.events.of_sweep(sweep.id)
                 if e.rule in MOVES}
    finally:
        await store.close()
    # Every run's compiled memory is stored with its job; temp is linear in the batch.
    per_batch = {j.mem_temp_gb / b for j, b in zip(jobs, batches, strict=True)
                 if j.mem_temp_gb is not None}
    assert per_batch and max(per_batch) - min(per_batch) < 0.01 * max(per_batch)
    # The prediction: the second probe is the true max fit (or one under it: 1% margin),
    # a geometric jump from the first, not one batch at a time.
    cliff = true_max_batch(truth, "llama2-70b", nodes)
    assert cliff - 1 <= batches[1] <= cliff and batches[1] >= 1.5 * batches[0]
    assert [moves[r.id] for r in runs[:2]] == [FIRST_PROBE.id, LARGEST_FIT.id]
    # The refinement: the true integer optimum, within the demo's budget.
    assert sweep.verdict is not None
    assert sweep.verdict["best"] == true_peak_batch(truth, "llama2-70b", nodes)
    assert len(runs) <= 5, batches


async def test_a_later_sweep_of_the_same_cell_starts_from_what_the_first_measured(
        tmp_path: Path) -> None:
    """The second sweep of the same model, node count and config runs the first one's peak,
    judges the rest by the first one's curve, and says so."""
    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    assert (await run(config, perf_spec()))[0] == EXIT_VERDICT
    assert (await run(config, perf_spec()))[0] == EXIT_VERDICT
    # Another config starts afresh. `minimal` (more activation memory): a search below the
    # default config's; `full` searched up to batch 55, where steps take hours of cluster time.
    other = perf_spec(overrides={"remat_policy": "minimal"})
    assert (await run(config, other))[0] == EXIT_VERDICT
    # `use_prior: false`: the same cell searched afresh (a new image may move the peak).
    assert (await run(config, perf_spec(use_prior=False)))[0] == EXIT_VERDICT
    store = await open_store(config)
    try:
        first, second, third, fresh = await store.sweeps.all()
        peak = true_peak_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
        assert first.verdict is not None and second.verdict is not None
        assert first.verdict["best"] == second.verdict["best"] == peak
        runs = await store.runs.of_sweep(second.id)
        assert len(runs) <= 2 and runs[0].params.overrides["per_device_batch_size"] == peak
        moves = [(e.rule, e.reason) for e in await store.events.of_sweep(second.id)
                 if e.rule in MOVES]
        assert moves[0][0] == FIRST_PROBE.id
        earlier = [c for c in second.verdict["caveats"] if c["kind"] == "earlier_sweep"]
        assert [c["sweep"] for c in earlier] == [first.id]
        check_golden_cases(SAID / "later_sweep_of_the_same_cell.txt", {
            "first probe": moves[0][1], "caveat": earlier[0]["text"]})
        assert fresh.verdict is not None and fresh.verdict["best"] == peak
        assert "earlier_sweep" not in [c["kind"] for c in fresh.verdict["caveats"]]
        assert len(await store.runs.of_sweep(fresh.id)) > 2
        third = [(e.rule, e.reason) for e in await store.events.of_sweep(third.id)
                 if e.rule in MOVES]
        assert third[0][0] == FIRST_PROBE.id and "memory estimate" in third[0][1]
    finally:
        await store.close()


async def test_a_later_sweep_whose_curve_moved_searches_afresh(tmp_path: Path) -> None:
    """The peak moved from 16 to 30 between two sweeps of the same cell: the earlier peak,
    run again, measures far below what the first sweep measured there. That is not a
    slower day: the first sweep's curve is not used, the search finds the new peak, and
    the verdict says why."""
    def curve(peak: int) -> dict[str, object]:
        return {"llama2-70b": {"max_batch": 40, "peak_batch": peak, "peak_tgs": 1400}}
    first_scenario = write_scenario(tmp_path, time_scale=0.0005, models=curve(16))
    (tmp_path / "moved").mkdir()
    moved = write_scenario(tmp_path / "moved", time_scale=0.0005, models=curve(30))
    assert (await run(sim_config(tmp_path, first_scenario), perf_spec()))[0] == EXIT_VERDICT
    config = sim_config(tmp_path, moved)
    assert (await run(config, perf_spec()))[0] == EXIT_VERDICT
    store = await open_store(config)
    try:
        first, second = await store.sweeps.all()
        assert first.verdict is not None and first.verdict["best"] == 16
        assert second.verdict is not None and second.verdict["settled"]
        truth, nodes = load_scenario(moved), expand_nodes(NODES)

        def true_tgs(batch: int) -> float:
            return true_outcome(truth, "llama2-70b", nodes,
                                {"per_device_batch_size": str(batch)}, {}, None).tgs

        peak = true_peak_batch(truth, "llama2-70b", nodes)
        assert true_tgs(int(second.verdict["best"])) >= 0.99 * true_tgs(peak)
        runs = await store.runs.of_sweep(second.id)
        assert runs[0].params.overrides["per_device_batch_size"] == 16 and len(runs) > 1
        said = (f"sweep #{first.id}'s curve does not hold here: per_device_batch_size=16 "
                "measured 0.")
        caveat = second.verdict["caveat"] or ""
        assert said in caveat and "its runs are not used" in caveat
        assert f"judged by sweep #{first.id}'s runs" not in caveat
        reasons = [e.reason for e in await store.events.of_sweep(second.id)
                   if e.rule in MOVES]
        assert said in reasons[1] and not any(said in r for r in reasons[2:])
        # Nothing is lost: the first sweep's runs are all still in the store.
        assert len(await store.runs.of_sweep(first.id)) == first.verdict["runs"]
    finally:
        await store.close()
