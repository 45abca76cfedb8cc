"""One test per monitoring rule and failure class, proven by the action taken on the
simulated cluster: the recorded facts, the rule that fired, and what happened next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.core.metrics import exposition
from sweepd.core.states import JobState, SweepState
from sweepd.store.rows import Event, Job
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario


async def _sweep(tmp_path: Path, faults: list[dict[str, Any]], expect: int,
                 spec: dict[str, Any] | None = None, **policy: Any
                 ) -> tuple[Store, int, list[Job], list[Event], list[str]]:
    scenario = write_scenario(tmp_path, faults=faults)
    config = sim_config(tmp_path, scenario, **policy)
    code, lines = await run(config, spec or perf_spec(values=[8]))
    store = await open_store(config)
    sweep = (await store.sweeps.all())[0]
    assert code == expect, (sweep.state, sweep.reason, lines)
    jobs, events = await store.jobs.of_sweep(sweep.id), await store.events.of_sweep(sweep.id)
    return store, sweep.id, jobs, events, lines


def _rules(events: list[Event]) -> list[str]:
    return [e.rule for e in events if e.rule]


async def test_hang_after_memstats_is_a_silent_oom_not_retried(tmp_path: Path) -> None:
    store, sid, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "hang", "phase": "compile"}], 4)
    try:
        assert [j.state for j in jobs] == [JobState.FAILED]
        assert jobs[0].failure_class == "oom"
        assert "hang.no_output" in _rules(events) and "oom.never_retry" in _rules(events)
        hang = next(e for e in events if e.rule == "hang.no_output")
        assert hang.evidence and "phase compile" in hang.evidence
        run = (await store.runs.of_sweep(sid))[0]
        assert run.outcome == "oom"
    finally:
        await store.close()


async def test_hang_before_memstats_is_retried_once(tmp_path: Path) -> None:
    store, _, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "rccl_flake", "times": 1}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert jobs[0].failure_class == "rccl_flake"
        assert "hang.retry_once" in _rules(events)
    finally:
        await store.close()


async def test_hang_in_training_retried_once_then_failed(tmp_path: Path) -> None:
    store, sid, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "hang", "phase": "training"}], 4)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.FAILED]
        assert _rules(events).count("hang.no_output") == 2
        assert "hang.retried_still_hangs" in _rules(events)
        assert (await store.runs.of_sweep(sid))[0].outcome == "hang"
    finally:
        await store.close()


async def test_ecc_in_preflight_excludes_the_node(tmp_path: Path) -> None:
    store, sid, jobs, _, _ = await _sweep(
        tmp_path, [{"kind": "ecc", "node": "chi2870", "times": 1}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert (jobs[0].failure_class, jobs[0].failure_node) == ("ecc", "chi2870")
        assert [e.node for e in await store.exclusions.of_sweep(sid)] == ["chi2870"]
    finally:
        await store.close()


async def test_single_node_crash_excludes_the_node(tmp_path: Path) -> None:
    store, sid, jobs, _, _ = await _sweep(
        tmp_path, [{"kind": "node_crash", "node": "chi2872", "times": 1}], EXIT_VERDICT)
    try:
        assert (jobs[0].failure_class, jobs[0].failure_node) == ("node_crash", "chi2872")
        assert [e.node for e in await store.exclusions.of_sweep(sid)] == ["chi2872"]
        assert jobs[-1].state == JobState.DONE
    finally:
        await store.close()


async def test_same_error_on_another_node_is_a_config_issue(tmp_path: Path) -> None:
    faults = [{"kind": "hsa_error", "node": "chi2832", "times": 1},
              {"kind": "hsa_error", "node": "chi2863", "times": 1}]
    store, sid, _jobs, events, lines = await _sweep(tmp_path, faults, EXIT_AWAITING_DECISION)
    try:
        assert "fault.same_error_other_nodes" in _rules(events)
        assert (await store.sweeps.get(sid)).state == SweepState.AWAITING_DECISION
        assert any("Failing node(s): chi2863" in line for line in lines)
    finally:
        await store.close()


async def test_config_error_on_all_nodes_stops_the_sweep(tmp_path: Path) -> None:
    store, _, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "config_error"}], EXIT_AWAITING_DECISION)
    try:
        assert jobs[0].failure_class == "config" and "config.stop" in _rules(events)
        assert len(jobs) == 1  # nothing more was submitted
    finally:
        await store.close()


async def test_unknown_xla_flag_stops_the_sweep(tmp_path: Path) -> None:
    store, _, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "unknown_flag"}], EXIT_AWAITING_DECISION)
    try:
        assert jobs[0].failure_class == "unknown_flag"
        assert jobs[0].failure_detail and "--xla_foo" in jobs[0].failure_detail
        assert "config.stop" in _rules(events)
    finally:
        await store.close()


async def test_two_consecutive_coordination_timeouts_stop(tmp_path: Path) -> None:
    store, _, jobs, events, lines = await _sweep(
        tmp_path, [{"kind": "coord_timeout"}], EXIT_AWAITING_DECISION)
    try:
        assert [j.failure_class for j in jobs] == ["coord_timeout", "coord_timeout"]
        assert [e.rule for e in events if e.kind == "decision"].count("coord.retry") == 1
        assert "coord.consecutive" in _rules(events)
        # The host a timeout printed on is the first rank left waiting, not a failing node
        # (red team f12: "Failing node(s): chi2863").
        waited = jobs[-1].failure_node
        assert waited and not any(f"Failing node(s): {waited}" in line for line in lines)
        told = [line for line in "\n".join(lines).splitlines()
                if line.startswith("Failing node(s):")]
        assert told, lines
        check_golden_cases(GOLDEN / "sim_rules" / "coordination_timeouts_stop.txt",
                           {"failing nodes": scrubbed("\n".join(told), waited=waited)})
    finally:
        await store.close()


async def test_excluding_below_the_model_minimum_stops(tmp_path: Path) -> None:
    store, _, _, events, _ = await _sweep(
        tmp_path, [{"kind": "hsa_error", "node": "chi2880", "times": 1}],
        EXIT_AWAITING_DECISION, spec=perf_spec(values=[8], min_nodes=8))
    try:
        assert "nodes.below_minimum" in _rules(events)
    finally:
        await store.close()


async def test_controller_down_briefly_the_sweep_waits(tmp_path: Path) -> None:
    store, _, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "controller_down", "seconds": 120}], EXIT_VERDICT)
    try:
        assert "controller.wait" in _rules(events)
        assert [j.state for j in jobs] == [JobState.DONE]
    finally:
        await store.close()


async def test_controller_down_past_the_limit_stops(tmp_path: Path) -> None:
    store, sid, _, events, _ = await _sweep(
        tmp_path, [{"kind": "controller_down", "seconds": 5000}], EXIT_AWAITING_DECISION)
    try:
        assert "controller.down_limit" in _rules(events)
        assert "unreachable" in ((await store.sweeps.get(sid)).reason or "")
    finally:
        await store.close()


async def test_nic_fault_is_retried_within_the_cap(tmp_path: Path) -> None:
    store, _, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "nic", "node": "chi2863", "times": 1}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert (jobs[0].failure_class, jobs[0].failure_node) == ("nic", "chi2863")
        assert "hang.no_output" in _rules(events)  # it hung at the first collective
    finally:
        await store.close()


async def test_host_oom_kill_is_retried_within_the_cap(tmp_path: Path) -> None:
    store, _, jobs, _, _ = await _sweep(
        tmp_path, [{"kind": "host_oom", "node": "chi2870", "times": 1}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert (jobs[0].failure_class, jobs[0].failure_node) == ("host_oom", "chi2870")
    finally:
        await store.close()


async def test_checkout_outage_retries_after_the_hourly_period(tmp_path: Path) -> None:
    store, sid, jobs, events, _ = await _sweep(
        tmp_path, [{"kind": "checkout_outage", "times": 1}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.RETRIED, JobState.DONE]
        assert jobs[0].failure_class == "checkout_outage"
        assert "checkout.retry_hourly" in _rules(events)
        # The retry waited the configured period (cluster seconds).
        assert jobs[1].submitted_at is not None and jobs[0].ended_at is not None
        assert jobs[1].submitted_at - jobs[0].ended_at >= 3600
        assert not await store.exclusions.of_sweep(sid)
    finally:
        await store.close()


async def test_cleanup_exit_143_after_the_last_step_is_success(tmp_path: Path) -> None:
    store, sid, jobs, _, _ = await _sweep(
        tmp_path, [{"kind": "cleanup_143"}], EXIT_VERDICT)
    try:
        assert [j.state for j in jobs] == [JobState.DONE]
        assert jobs[0].summary_status == "CANCELLED" and jobs[0].tgs
        assert (await store.runs.of_sweep(sid))[0].outcome == "pass"
    finally:
        await store.close()


async def test_cancelled_outside_sweepd_is_run_again_and_no_verdict_rests_on_it(
        tmp_path: Path) -> None:
    import asyncio

    from sweepd.app import foreground
    from sweepd.clusters.factory import make_backend

    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    lines: list[str] = []
    sweep = asyncio.create_task(foreground.run_sweep(
        config, perf_spec(values=[6, 8, 10, 12], steps=50), lines.append))
    log_dir = config.daemon.outputs / "sweep-1"
    while not (log_dir.exists() and any(log_dir.glob("*.log"))):
        await asyncio.sleep(0.05)
    backend, _ = make_backend(config)
    job_id = next(log_dir.glob("*.log")).name.split("-")[0]
    await asyncio.sleep(0.3)
    await backend.cancel(job_id)  # a person's scancel, not sweepd's
    assert await sweep == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        # Shown as what happened (cancelled), not as a failure or a retry of one.
        assert (jobs[0].state, jobs[0].failure_class) == (JobState.CANCELLED, "cancelled")
        assert jobs[1].run_id == jobs[0].run_id and jobs[1].state == JobState.DONE
        assert "cancelled.rerun" in _rules(await store.events.of_sweep(1))
        assert not [r for r in await store.runs.of_sweep(1) if r.state == "failed"]
        assert (await store.sweeps.get(1)).verdict["best"] == 10   # the true optimum
        # The line the chat gets says what happened: cancelled, run again; no failure.
        [told] = [e.reason for e in await store.events.of_sweep(1, kind="progress")
                  if e.job_id == jobs[0].id]
        check_golden_cases(GOLDEN / "sim_rules" / "cancelled_outside.txt",
                           {"progress": scrubbed(told, job=jobs[0].backend_id)})
        assert "FAIL" not in told and "RETRY" not in told
        # A person's cancel is no failure for alerts: counted apart from the failures.
        got = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families((await exposition(store, None)).decode())
               for s in f.samples}
        assert not [k for k in got if k[0] == "sweepd_job_failures_total"], got
        assert got[("sweepd_job_cancels_total", ())] == 1
        assert got[("sweepd_jobs", (("kind", "model-perf"), ("state", "cancelled")))] == 1
    finally:
        await store.close()
