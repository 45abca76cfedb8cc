"""Crash safety on real Slurm: the daemon is SIGKILLed at 20+ random moments of a model perf
sweep and started again each time. The result, the number of `sbatch` calls and the event
trail equal those of an uninterrupted run of the same scenario."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_max_batch
from sweepd.util.hostlists import expand_nodes
from tests.daemon_proc import Daemon
from tests.simrun import perf_spec, run, write_scenario
from tests.slurm_cluster import slurm_dir
from tests.slurm_sweep import FAST_POLICY, HEADER, SIM, SUMMARY, direct_config

pytestmark = pytest.mark.slurm

NODES = "chi[2867-2868]"
KILLS = 20


def _counting_wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """A command prefix that counts `sbatch` calls, then runs the command."""
    count = tmp_path / "sbatch.count"
    wrapper = tmp_path / "count-sbatch"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = sbatch ] && echo x >> "{count}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, count


def _toml(tmp_path: Path, scenario: Path, wrapper: Path) -> Path:
    state = tmp_path / "sim-state"
    slurm = {
        "mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
        "command_prefix": [str(wrapper)],
        "train_command": [*SIM, "train", "--scenario", str(scenario), "--state-dir", str(state)],
        "header_command": HEADER, "summary_command": SUMMARY,
    }
    policy = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in FAST_POLICY.items())
    lines = [
        "[daemon]", f'state_dir = "{tmp_path / "state"}"', f'socket = "{tmp_path / "sweepd.sock"}"',
        "tick_s = 0.05", "", "[cluster]", 'backend = "slurm"', "", "[cluster.slurm]",
        *(f"{k} = {json.dumps(v)}" for k, v in slurm.items()), "", "[policy]", policy,
    ]
    path = tmp_path / "sweepd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _trail(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    try:
        runs = conn.execute("SELECT id, label, outcome, tgs FROM runs ORDER BY seq").fetchall()
        label = {r[0]: r[1] for r in runs}
        events = conn.execute(
            "SELECT kind, run_id, job_id, from_state, to_state, reason FROM events"
            " WHERE kind IN ('transition', 'progress') ORDER BY id").fetchall()
        verdict = conn.execute("SELECT state, verdict_json FROM sweeps").fetchone()
    finally:
        conn.close()
    # The adopting transition after a crash says so in its reason; compare the facts.
    shape = Counter((k, label.get(r), f, t) for k, r, _, f, t, _ in events)
    return {"table": [r[1:] for r in runs], "shape": shape, "events": events,
            "verdict": verdict}


@pytest.mark.timeout(400)   # many daemon restarts on real Slurm: ~110 s on a loaded machine
async def test_sigkill_at_random_moments_loses_and_doubles_nothing(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario_dir = tmp_path / "scenario"
    scenario_dir.mkdir()
    scenario = write_scenario(scenario_dir, time_scale=0.003)
    text = scenario.read_text().replace("noise: 0.003", "noise: 0.0")
    scenario.write_text(text)
    cliff = true_max_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
    spec = perf_spec(nodes=NODES, values=[2, 4, 6, 8, cliff + 1])

    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    wrapper, ref_count = _counting_wrapper(ref_dir)
    config = direct_config(ref_dir, scenario,
                           **{"cluster.slurm": {**_slurm(ref_dir, scenario, wrapper)}})
    code, lines = await run(config, spec)
    assert code == 0, lines
    reference = _trail(config.daemon.db_path)

    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    wrapper, count = _counting_wrapper(crash_dir)
    daemon = Daemon(crash_dir, _toml(crash_dir, scenario, wrapper))
    rng = random.Random(20261129)
    states_at_kill: Counter[str] = Counter()
    db = crash_dir / "state" / "sweepd.db"
    try:
        client = daemon.start()
        sweep_id = int(client.submit(spec)["id"])
        for _ in range(KILLS):
            await asyncio.sleep(rng.uniform(0.05, 1.2))
            daemon.stop(signal.SIGKILL)
            states_at_kill.update(_job_states(db))
            client = daemon.start()
        deadline = time.monotonic() + 180
        while client.reads.show(sweep_id)["state"] not in ("done", "failed", "awaiting_decision"):
            assert time.monotonic() < deadline, "the sweep did not finish after the crashes"
            await asyncio.sleep(0.2)
    finally:
        daemon.kill()
    crashed = _trail(db)
    assert crashed["verdict"] == reference["verdict"]
    assert crashed["table"] == reference["table"]
    assert len(count.read_text().split()) == len(ref_count.read_text().split())
    doubled = [e for e, n in Counter(crashed["events"]).items() if n > 1]
    assert not doubled, f"recorded twice: {doubled}"
    assert crashed["shape"] == reference["shape"], "an event was lost or added"
    # The kills landed in more than one phase of the jobs' lives.
    assert len(states_at_kill) >= 2, states_at_kill


def _slurm(tmp_path: Path, scenario: Path, wrapper: Path) -> dict[str, Any]:
    state = tmp_path / "sim-state"
    return {"mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
            "command_prefix": [str(wrapper)],
            "train_command": [*SIM, "train", "--scenario", str(scenario), "--state-dir",
                              str(state)],
            "header_command": HEADER, "summary_command": SUMMARY}


def _job_states(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT state FROM jobs WHERE state IN "
                            "('submitting','queued','running','hung')").fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows] or ["between jobs"]
