"""Cluster faults on the real local Slurm: a drained pinned node, and a controller that
stops answering for a while (shorter, then longer than the limit)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from sweepd.config import Config
from sweepd.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_cluster import cluster_env, run_cluster_script, slurm_dir
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm

NODES = "chi[2880-2881]"


def _scontrol(*args: str, check: bool = True) -> str:
    done = subprocess.run(["scontrol", *args], env={**os.environ, **cluster_env()},
                          check=check, capture_output=True, text=True, timeout=30)
    return done.stdout


def _settle(nodes: str) -> None:
    """A job that ended while slurmctld was down can leave its nodes COMPLETING for long:
    cycle them through DOWN so the next test starts from idle nodes."""
    if "COMPLETING" in _scontrol("show", "node", nodes, check=False):
        _scontrol("update", f"NodeName={nodes}", "State=DOWN", "Reason=sweepd-test",
                  check=False)
    _scontrol("update", f"NodeName={nodes}", "State=RESUME", check=False)


async def _rules(config: Config) -> list[str]:
    store = await open_store(config)
    try:
        return [e.rule for e in await store.events(1) if e.rule]
    finally:
        await store.close()


async def test_drained_node_without_resume_rights_stops(tmp_path: Path,
                                                        slurm_env: dict[str, str]) -> None:
    _scontrol("update", "NodeName=chi2881", "State=DRAIN", "Reason=sweepd-test")
    try:
        config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
        code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
        assert code == EXIT_AWAITING_DECISION
        message = "\n".join(lines)
        assert "chi2881 (dr" in message and "not resumed" in message
        assert "node.unusable" in await _rules(config)
    finally:
        _settle("chi2881")


async def test_drained_node_is_resumed_where_allowed(tmp_path: Path,
                                                     slurm_env: dict[str, str]) -> None:
    _scontrol("update", "NodeName=chi2881", "State=DRAIN", "Reason=sweepd-test")
    try:
        config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
        config.cluster.slurm.allow_resume = True
        code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
        assert code == EXIT_VERDICT, lines
        assert "node.resume" in await _rules(config)
    finally:
        _settle("chi2881")


async def _outage(config: Config, seconds: float) -> int:
    """Run a sweep; once its first job runs, stop slurmctld for at least `seconds`."""
    sweep = asyncio.create_task(run(config, perf_spec(nodes=NODES, values=[4])))
    db = config.daemon.db_path
    while not db.exists() or not _running(db):
        assert not sweep.done(), sweep.result()
        await asyncio.sleep(0.1)
    pid = int((slurm_dir() / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    try:
        await asyncio.sleep(seconds)
    finally:
        started = await asyncio.to_thread(run_cluster_script, "start")
    assert started.returncode == 0
    code, _ = await sweep
    await asyncio.sleep(3)  # let slurmd report the cancelled job's end
    await asyncio.to_thread(_settle, NODES)
    checked = await asyncio.to_thread(run_cluster_script, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return code


def _running(db: Path) -> bool:
    conn = sqlite3.connect(db)
    try:
        return bool(conn.execute("SELECT 1 FROM jobs WHERE state = 'running'").fetchone())
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


async def test_controller_down_shorter_than_the_limit_waits(tmp_path: Path,
                                                            slurm_env: dict[str, str]) -> None:
    # A minute without slurmctld, under the default 15-minute limit: the job ends meanwhile
    # and its result is taken when the controller answers again.
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = direct_config(tmp_path, scenario, **{"policy.controller_down_limit_s": 900})
    assert await _outage(config, 60) == EXIT_VERDICT
    rules = await _rules(config)
    assert "controller.wait" in rules and "controller.down_limit" not in rules
    store = await open_store(config)
    try:
        events = await store.events(1)
    finally:
        await store.close()
    # Measured from the last answer before the outage: at least the minute it lasted.
    back = [e for e in events if e.rule == "controller.back"]
    assert len(back) == 1 and back[0].evidence
    assert float(back[0].evidence.removeprefix("down_s: ")) >= 60
    # One line to the person when it goes, one when it is back.
    told = [e.reason for e in events if e.kind == "progress" and "controller" in e.reason]
    assert len(told) == 2 and "does not answer" in told[0] and "answers again" in told[1], told


async def test_controller_down_past_the_limit_stops(tmp_path: Path,
                                                    slurm_env: dict[str, str]) -> None:
    # The limit scaled down to 6 s so the test stays short; the rule is the same at 900 s.
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = direct_config(tmp_path, scenario, **{"policy.controller_down_limit_s": 6})
    assert await _outage(config, 14) == EXIT_AWAITING_DECISION
    assert "controller.down_limit" in await _rules(config)
