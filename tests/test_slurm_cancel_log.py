"""On the local real Slurm cluster: a job cancelled by hand and a log deleted (or shadowed
by a directory) while its job runs say nothing about the swept value (issue 16, 1 and 2)."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.config import Config
from sweepd.core.states import JobState
from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_peak_batch
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_cluster import cluster_env
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm

NODES = "chi[2832,2863]"


def _first_running(db: Path) -> tuple[str, str] | None:
    """(scheduler id, log path) of the first job once it runs and has logged a step."""
    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT backend_id, log_path FROM jobs WHERE id = 1 AND "
                           "state = 'running' AND last_step IS NOT NULL").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return (str(row[0]), str(row[1])) if row else None


async def _when_first_runs(config: Config, sweep: asyncio.Task[tuple[int, list[str]]]
                           ) -> tuple[str, str]:
    while (found := _first_running(config.daemon.db_path)) is None:
        assert not sweep.done(), sweep.result()
        await asyncio.sleep(0.1)
    return found


async def test_a_hand_scancel_is_run_again_and_the_optimum_is_right(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003)
    peak = true_peak_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
    assert peak in (8, 10, 12)   # the cancelled 6 must not cap the search below it
    config = direct_config(tmp_path, scenario)
    sweep = asyncio.create_task(run(config, perf_spec(nodes=NODES, values=[6, 8, 10, 12],
                                                      steps=50)))
    job_id, _ = await _when_first_runs(config, sweep)
    subprocess.run(["scancel", job_id], env={**os.environ, **cluster_env()}, check=True,
                   timeout=30)
    code, lines = await sweep
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        s = (await store.sweeps.all())[0]
        assert s.verdict is not None and s.verdict["best"] == peak, lines
        jobs = await store.jobs.of_sweep(s.id)
        assert (jobs[0].state, jobs[0].failure_class) == (JobState.CANCELLED, "cancelled")
        assert jobs[1].run_id == jobs[0].run_id and jobs[1].state == JobState.DONE
        assert not [r for r in await store.runs.of_sweep(s.id) if r.failure_class == "cancelled"]
        assert "cancelled.rerun" in [e.rule for e in await store.events.of_sweep(s.id)]
    finally:
        await store.close()


@pytest.mark.parametrize("shadow", [False, True], ids=["deleted", "directory"])
async def test_a_log_removed_while_its_job_runs_is_still_read(
        tmp_path: Path, slurm_env: dict[str, str], shadow: bool) -> None:
    # The hang limit (20 s) is well under the job's remaining run: silence on the path
    # would have been called a hang, and a COMPLETED job an unrecognised failure.
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = direct_config(tmp_path, scenario)
    sweep = asyncio.create_task(run(config, perf_spec(nodes=NODES, values=[4], steps=30)))
    _, log_path = await _when_first_runs(config, sweep)
    Path(log_path).unlink()
    if shadow:
        Path(log_path).mkdir()
    code, lines = await sweep
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        s = (await store.sweeps.all())[0]
        jobs = await store.jobs.of_sweep(s.id)
        assert [j.state for j in jobs] == [JobState.DONE] and jobs[0].tgs
        assert len(await store.jobs.steps(jobs[0].id)) == 30
        events = await store.events.of_sweep(s.id)
        assert len([e for e in events if e.rule == "log.detached"]) == 1
        told = [e for e in events if e.kind == "progress" and "reads on through" in e.reason]
        assert len(told) == 1
    finally:
        await store.close()


def _running_ids(db: Path) -> list[str]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT backend_id FROM jobs WHERE state = 'running'").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [str(r[0]) for r in rows]


async def test_every_running_job_scancelled_stops_and_asks(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    # A person cancelling the whole sweep by hand (one scancel of all its jobs): asked, not
    # run again behind their back, and no node is judged on it.
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.01))
    sweep = asyncio.create_task(run(config, {"kind": "node-perf", "steps": 40,
                                             "nodes": "chi[2832,2863,2867-2868]"}))
    while len(ids := _running_ids(config.daemon.db_path)) < 4:
        assert not sweep.done(), sweep.result()
        await asyncio.sleep(0.1)
    subprocess.run(["scancel", *ids], env={**os.environ, **cluster_env()}, check=True,
                   timeout=30)
    code, lines = await sweep
    assert code == EXIT_AWAITING_DECISION, lines
    store = await open_store(config)
    try:
        rules = [e.rule for e in await store.events.of_sweep(1)]
        assert "cancelled.whole_sweep" in rules
        assert not [r for r in await store.runs.of_sweep(1) if r.state == "failed"]
        # Each job a person cancelled is shown cancelled (the one that stopped the sweep
        # too), not failed.
        assert {j.state for j in await store.jobs.of_sweep(1)} == {JobState.CANCELLED}
        # The stop message says the sweep asks, not that a failure could not be recovered.
        [stop] = [e.reason for e in await store.events.of_sweep(1)
                  if e.kind == "progress" and "recovery attempted" in e.reason]
        assert "not recoverable" not in stop, stop
        # The scheduler's job ids in the artifacts' paths differ on each run.
        said = re.sub(r"/\d+-\*", "/<job>-*", scrubbed(stop, tmp=tmp_path))
        check_golden(GOLDEN / "slurm_cancel_log" / "whole_sweep_stop.txt", f"{said}\n")
    finally:
        await store.close()


def _last_step(db: Path) -> tuple[str, int] | None:
    """(scheduler id, last step) of the first job while it runs."""
    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT backend_id, last_step FROM jobs WHERE id = 1 AND "
                           "state = 'running' AND last_step IS NOT NULL").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return (str(row[0]), int(row[1])) if row else None


async def test_a_scancel_after_the_measured_steps_is_no_success(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    # The trainer lingers after its last step (a slow teardown, a checkpoint): a person's
    # scancel then ends the job CANCELLED with every step of the steady window printed. The
    # measurement stands by its own rule, which says why; the job is never called a success.
    scenario = write_scenario(tmp_path, time_scale=0.003)
    config = direct_config(tmp_path, scenario)
    train = config.cluster.slurm.train_command
    lingering = ["bash", "-c", f'{" ".join(train)} "$@"; sleep 120', "train"]
    config = config.model_copy(update={"cluster": config.cluster.model_copy(update={
        "slurm": config.cluster.slurm.model_copy(update={"train_command": lingering})})})
    sweep = asyncio.create_task(run(config, perf_spec(nodes=NODES, values=[4], steps=15)))
    while (found := _last_step(config.daemon.db_path)) is None or found[1] < 14:
        assert not sweep.done(), sweep.result()
        await asyncio.sleep(0.1)
    subprocess.run(["scancel", found[0]], env={**os.environ, **cluster_env()}, check=True,
                   timeout=30)
    code, lines = await sweep
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        [job] = await store.jobs.of_sweep(1)
        assert job.tgs and job.scheduler_state == "CANCELLED"
        ended = [e for e in await store.events.of_sweep(1) if e.job_id == job.id
                 and e.to_state == job.state]
        assert [e.rule for e in ended] == ["cancelled.measured"], ended
        check_golden(GOLDEN / "slurm_cancel_log" / "cancelled_measured.txt",
                     f"{ended[0].reason.replace(found[0], '<job>')}\n")
        assert "Status: CANCELLED" in (ended[0].evidence or "")
        [r] = await store.runs.of_sweep(1)
        assert r.outcome == "pass" and r.tgs == job.tgs
        passed = [e for e in await store.events.of_sweep(1) if e.run_id == r.id
                  and e.to_state == "passed"]
        assert [e.rule for e in passed] == ["cancelled.measured"]
        # The job's result line says it was cancelled and why its measurement stands.
        assert "cancelled outside sweepd" in passed[0].reason, passed[0].reason
    finally:
        await store.close()
