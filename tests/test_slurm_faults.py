"""Cluster faults on the real local Slurm: a drained pinned node, and a controller that
stops answering for a while (shorter, then longer than the limit)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.clusters.node_probe import DMESG_PATTERN
from sweepd.config import Config
from sweepd.store.store import Store
from tests.daemon_proc import Daemon
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_cluster import cluster_env, run_cluster_script, slurm_dir
from tests.slurm_sweep import FAST_POLICY, SIM, direct_config

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


def _config(tmp_path: Path, scenario: Path, **extra: Any) -> Config:
    """The sweeps here print their log header and summary with the simulator itself, not the
    quick stand-in the other Slurm tests use: how a job meets the controller outage (its
    step refused, or its end reported late) follows from when it starts, and the outage
    tests were made for this timing (with the quicker start, the job ends inside the outage,
    and its nodes, left COMPLETING, are cycled through DOWN: the cluster check then waits
    ~50 s for them)."""
    config = direct_config(tmp_path, scenario, **extra)
    config.cluster.slurm.header_command = [*SIM, "header"]
    config.cluster.slurm.summary_command = [*SIM, "summary"]
    return config


async def _rules(config: Config) -> list[str]:
    store = await open_store(config)
    try:
        return [e.rule for e in await store.events.of_sweep(1) if e.rule]
    finally:
        await store.close()


def _parts(lines: list[str]) -> dict[str, list[str]]:
    """A node's evidence by its source (`  source: what it said`, sweepd/core/node_evidence):
    each source's lines, in order."""
    parts: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("  ") and not line.startswith("    "):
            source, _, said = line.strip().partition(": ")
            parts.setdefault(source, []).append(said)
    return parts


async def test_drained_node_without_resume_rights_stops(tmp_path: Path,
                                                        slurm_env: dict[str, str]) -> None:
    _scontrol("update", "NodeName=chi2881", "State=DRAIN", "Reason=sweepd-test")
    try:
        config = _config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
        code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
        assert code == EXIT_AWAITING_DECISION
        message = "\n".join(lines)
        assert "chi2881 (dr" in message and "not resumed" in message
        assert "node.unusable" in await _rules(config)
        # The node's own evidence: the real scheduler's record (its drain reason) and
        # what its shell (the fake ssh) printed, in the stop message.
        evidence = message.split("Node evidence:\n", 1)[1].splitlines()
        assert evidence[0] == "chi2881:"
        parts = _parts(evidence[1:])
        assert list(parts)[:3] == ["scontrol show node", "dmesg", "rocm-smi"], evidence
        [show] = parts["scontrol show node"]
        fields = dict(word.split("=", 1) for word in show.split() if "=" in word)
        assert fields["NodeName"] == "chi2881" and fields["Reason"] == "sweepd-test", show
        assert "DRAIN" in fields["State"].split("+"), show
        assert parts["dmesg"] == [f"0 recent line(s) matching {DMESG_PATTERN.pattern}"]
        assert parts["rocm-smi"][0].startswith("temperatures (C): GPU[0] 45")
    finally:
        _settle("chi2881")


async def test_drained_node_is_resumed_where_allowed(tmp_path: Path,
                                                     slurm_env: dict[str, str]) -> None:
    _scontrol("update", "NodeName=chi2881", "State=DRAIN", "Reason=sweepd-test")
    try:
        config = _config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
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
        try:
            await asyncio.sleep(seconds)
        finally:
            started = await asyncio.to_thread(run_cluster_script, "start")
        assert started.returncode == 0
        code, _ = await sweep
        await asyncio.sleep(3)  # let slurmd report the cancelled job's end
    finally:
        # Even when the test fails or times out: the next test needs idle nodes.
        sweep.cancel()
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


OUTAGE_S = 20


@pytest.mark.timeout(300)   # an outage, then the sweep: slow on a loaded machine
async def test_controller_down_shorter_than_the_limit_waits(tmp_path: Path,
                                                            slurm_env: dict[str, str]) -> None:
    # 20 s without slurmctld, under the default 15-minute limit: the job (a few seconds at
    # this time scale) ends meanwhile and its result is taken when the controller answers
    # again. The length is not the point, only that it is under the limit.
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = _config(tmp_path, scenario, **{"policy.controller_down_limit_s": 900})
    assert await _outage(config, OUTAGE_S) == EXIT_VERDICT
    rules = await _rules(config)
    assert "controller.wait" in rules and "controller.down_limit" not in rules
    store = await open_store(config)
    try:
        events = await store.events.of_sweep(1)
    finally:
        await store.close()
    # Measured from the last answer before the outage: at least as long as it lasted.
    back = [e for e in events if e.rule == "controller.back"]
    assert len(back) == 1 and back[0].evidence
    assert float(back[0].evidence.removeprefix("down_s: ")) >= OUTAGE_S
    # One line to the person when it goes, one when it is back.
    told = [e.reason for e in events if e.kind == "progress" and "controller" in e.reason]
    assert len(told) == 2 and "does not answer" in told[0] and "answers again" in told[1], told


async def test_controller_down_past_the_limit_stops(tmp_path: Path,
                                                    slurm_env: dict[str, str]) -> None:
    # The limit scaled down to 6 s so the test stays short; the rule is the same at 900 s.
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = _config(tmp_path, scenario, **{"policy.controller_down_limit_s": 6})
    assert await _outage(config, 14) == EXIT_AWAITING_DECISION
    assert "controller.down_limit" in await _rules(config)


def _events(db: Path, rule: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] or "" for r in conn.execute(
            "SELECT evidence FROM events WHERE rule = ?", (rule,)).fetchall()]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


async def test_an_outage_outlives_a_daemon_restart(tmp_path: Path,
                                                   slurm_env: dict[str, str]) -> None:
    """Killed and restarted while slurmctld is away, the daemon goes on measuring the
    outage from the last answer before it and tells the person once when it goes and once
    when it is back."""
    scenario = write_scenario(tmp_path, time_scale=0.01)
    daemon = Daemon(tmp_path, _daemon_toml(tmp_path, scenario))
    db = tmp_path / "state" / "sweepd.db"
    outage_s = 20.0
    try:
        client = daemon.start()
        client.submit(perf_spec(nodes=NODES, values=[4]))
        await _until(lambda: _running(db), "no job ran")
        pid = int((slurm_dir() / "run" / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        stopped = time.monotonic()
        try:
            await _until(lambda: bool(_events(db, "controller.wait")), "no outage seen")
            daemon.stop(signal.SIGKILL)
            await asyncio.to_thread(daemon.start_detached)
            await asyncio.sleep(max(0.0, outage_s - (time.monotonic() - stopped)))
        finally:
            started = await asyncio.to_thread(run_cluster_script, "start")
        assert started.returncode == 0
        await _until(lambda: bool(_events(db, "controller.back")), "the outage never ended")
        store = await Store.open(db)
        try:
            told = [e.reason for e in await store.events.of_sweep(1, kind="progress")
                    if "controller" in e.reason]
        finally:
            await store.close()
    finally:
        daemon.kill()
        await asyncio.to_thread(_cancel_jobs, db)
        await asyncio.sleep(3)
        await asyncio.to_thread(_settle, NODES)
    [back] = _events(db, "controller.back")
    assert float(back.removeprefix("down_s: ")) >= outage_s
    assert len(told) == 2 and "does not answer" in told[0] and "answers again" in told[1], told


def _daemon_toml(tmp_path: Path, scenario: Path) -> Path:
    slurm = {"mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
             "train_command": [*SIM, "train", "--scenario", str(scenario), "--state-dir",
                               str(tmp_path / "sim-state")],
             "header_command": [*SIM, "header"], "summary_command": [*SIM, "summary"]}
    lines = ["[daemon]", f'state_dir = "{tmp_path / "state"}"',
             f'socket = "{tmp_path / "sweepd.sock"}"', "tick_s = 0.1", "",
             "[cluster]", 'backend = "slurm"', "", "[cluster.slurm]",
             *(f"{k} = {json.dumps(v)}" for k, v in slurm.items()), "", "[policy]",
             *(f"{k.split('.')[1]} = {v}" for k, v in FAST_POLICY.items())]
    path = tmp_path / "sweepd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cancel_jobs(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        ids = [r[0] for r in conn.execute("SELECT backend_id FROM jobs WHERE backend_id "
                                          "IS NOT NULL").fetchall()]
    finally:
        conn.close()
    if ids:
        subprocess.run(["scancel", *ids], env={**os.environ, **cluster_env()}, check=False,
                       timeout=30)


async def _until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)
