"""Whole sweeps on the local backend over a fake MaxText trainer: a pass, an OOM, a hang the
engine's hang detection cancels, a daemon killed mid-job and started again (the job adopted,
one process per run), and `sweepd run --config F spec.yaml` for a model sweepd does not
know with no `nodes` key, reaching a verdict."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from sweepd.clusters.local.wrapper import start_ticks
from sweepd.config import Config, load_config
from tests.daemon_proc import Daemon
from tests.local_trainer import local_config_text, starts, write_trainer
from tests.simrun import recorded, run


def _config(tmp_path: Path, **env: str) -> tuple[Path, Config]:
    trainer = write_trainer(tmp_path)
    path = tmp_path / "sweepd.toml"
    path.write_text(local_config_text(tmp_path, trainer,
                                      {"FAKE_STARTS": str(tmp_path / "starts"), **env},
                                      max_retries=0))
    return path, load_config(path)


def _spec(**extra: Any) -> dict[str, Any]:
    """A model sweepd has no shape for, and no `nodes`: the local backend's one node."""
    return {"kind": "model-perf", "model": "tiny-llama", "name": "tiny",
            "overrides": {"base_emb_dim": 1024}, **extra}


async def _rows(config: Config) -> list[tuple[str, str, str | None]]:
    from tests.simrun import open_store

    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        return [(j.state, j.backend_id or "", j.log_path) for j in jobs]
    finally:
        await store.close()


async def test_a_pass_and_an_oom_on_the_one_node(tmp_path: Path) -> None:
    _, config = _config(tmp_path)
    code, lines = await run(config, _spec(values=[2, 12]))
    _, rules, runs = await recorded(config)
    assert code == 0, lines
    outcomes = {label.split("=")[-1]: outcome for label, outcome in runs}
    assert outcomes == {"2": "pass", "12": "oom"}, runs
    assert "oom.never_retry" in rules
    # Both ran on the local node, one after the other, each once.
    assert len(starts(tmp_path / "starts")) == 2
    logs = [Path(log).read_text() for _, _, log in await _rows(config) if log]
    assert "Status: SUCCESS (exit 0)" in logs[0] and "RESOURCE_EXHAUSTED" in logs[1]


async def test_a_hung_job_is_cancelled_by_the_engine_and_its_group_ends(
        tmp_path: Path) -> None:
    _, config = _config(tmp_path, FAKE_MODE="hang")
    code, _ = await run(config, _spec(values=[2]))
    _, rules, runs = await recorded(config)
    # The engine's own rules: a hang is retried once, then recorded.
    assert {"hang.retry_once", "hang.retried_still_hangs"} <= set(rules), rules
    assert code != 0 and [outcome for _, outcome in runs] != ["pass"]
    pids = [int(line.split()[0]) for line in starts(tmp_path / "starts")]
    assert len(pids) == 2
    deadline = time.monotonic() + 30   # the wrapper's grace period, then SIGKILL
    while any(start_ticks(pid) is not None for pid in pids):
        assert time.monotonic() < deadline, "a hung trainer outlived its cancel"
        await asyncio.sleep(0.1)
    for _, job_id, log in await _rows(config):
        assert log is not None and "Status: CANCELLED" in Path(log).read_text()
        assert (tmp_path / "state" / "local" / "jobs" / f"{job_id}.status").exists()


def _serve_until_restarted(tmp_path: Path, config: Path) -> dict[str, Any]:
    daemon = Daemon(tmp_path, config)
    try:
        client = daemon.start()
        sweep_id = int(client.submit(_spec(values=[2]))["id"])
        deadline = time.monotonic() + 60
        while len(starts(tmp_path / "starts")) < 1:
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        daemon.stop(signal.SIGKILL)   # a crash: the job runs on without it
        client = daemon.start()
        deadline = time.monotonic() + 90
        while (shown := client.reads.show(sweep_id))["state"] not in (
                "done", "failed", "awaiting_decision"):
            assert time.monotonic() < deadline, f"sweep still {shown['state']}"
            time.sleep(0.1)
        return dict(shown)
    finally:
        daemon.kill()


async def test_a_daemon_killed_mid_job_adopts_it_on_restart(tmp_path: Path) -> None:
    config, _ = _config(tmp_path, FAKE_MODE="slow")
    shown = await asyncio.to_thread(_serve_until_restarted, tmp_path, config)
    assert shown["state"] == "done"
    assert [r["outcome"] for r in shown["run_list"]] == ["pass"]
    # No duplicate, no orphan: one job row, one trainer process for the one run.
    assert len(shown["jobs"]) == 1
    assert len(starts(tmp_path / "starts")) == 1
    assert sorted((tmp_path / "state" / "local" / "jobs").glob("*.json")) == \
        [tmp_path / "state" / "local" / "jobs" / "1.json"]


def test_sweepd_run_with_an_unknown_model_and_no_nodes_reaches_a_verdict(
        tmp_path: Path) -> None:
    config, _ = _config(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec()))
    done = subprocess.run([sys.executable, "-m", "sweepd", "run", "--config", str(config),
                           "--state-dir", str(tmp_path / "state"), str(spec)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "optimum per_device_batch_size=6" in done.stdout
    assert "Nodes: box1" in done.stdout
    ran = starts(tmp_path / "starts")
    # A small first probe (no shape, no estimate), and never past the largest fit it
    # learned from the compiled-memory lines (batch 8 fits, 9 would not).
    assert "per_device_batch_size=1 " in ran[0] + " "
    batches = [int(line.split("per_device_batch_size=")[1].split()[0]) for line in ran]
    # One value runs twice at most: on one box the leader runs again early to measure the
    # noise between runs (model_perf.noise_probe; measured_noise is on by default there).
    assert max(batches) <= 8 and len(batches) - len(set(batches)) <= 1


def test_sweepd_run_of_the_tpu_tuning_example_on_the_one_node(tmp_path: Path) -> None:
    # The shipped TPU example names a slot (`node_count: 1`), not nodes: on the local backend
    # that is its one node. Its jobs pass what upstream MaxText accepts (no GPU heartbeat key)
    # and each profile's flags in LIBTPU_INIT_ARGS.
    config, _ = _config(tmp_path)
    example = Path(__file__).parents[1] / "examples" / "xla-tuning" / "tpu.yaml"
    done = subprocess.run([sys.executable, "-m", "sweepd", "run", "--config", str(config),
                           "--state-dir", str(tmp_path / "state"), str(example)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no change to deploy" in done.stdout and "Nodes: box1" in done.stdout
    ran = starts(tmp_path / "starts")
    # The example's max_runs (6); one device: no flag of a collective-only family ran
    # (catalog.no_collectives), as on the chip (tests/test_tpu_xla_one_chip_recorded.py).
    assert len(ran) == 6 and not any("heartbeat" in line for line in ran)
    assert any("flags=--xla_tpu_scoped_vmem_limit_kib=" in line for line in ran)
    assert not any(word in line.partition("flags=")[2] for line in ran
                   for word in ("all_gather", "all_reduce", "collective", "reduce_scatter",
                                "data_parallel"))
    # The evidence run has the profiler on (its own overrides, not the spec's): read over the
    # profiler's window without its start and stop, it reads as the baseline does (before,
    # over steps 5-14 as an unprofiled run, +356 % on the chip).
    db = sqlite3.connect(tmp_path / "state" / "sweepd.db")
    rows = dict(db.execute("SELECT j.id, j.profiler FROM jobs j").fetchall())
    tgs = dict(db.execute("SELECT j.id, j.tgs FROM jobs j").fetchall())
    assert rows[2] == 1 and rows[1] == 0
    assert abs(tgs[2] / tgs[1] - 1) < 1e-6


async def test_an_outside_kill_after_the_steady_window_is_said_in_the_verdict(
        tmp_path: Path) -> None:
    """A person's `kill -TERM` of the trainer after its last step (it lingers in teardown):
    on Slurm the same scancel is judged by `cancelled.measured` and said in the verdict;
    the local backend now reads alike, not `[success] completed` with no word of the kill."""
    _, config = _config(tmp_path, FAKE_MODE="linger")
    sweep = asyncio.create_task(run(config, _spec(values=[2])))
    log = None
    deadline = time.monotonic() + 120
    while log is None or "completed step: 14," not in log.read_text():
        assert not sweep.done() and time.monotonic() < deadline
        rows = await _rows(config) if config.daemon.db_path.exists() else []
        log = Path(rows[0][2]) if rows and rows[0][2] and Path(rows[0][2]).exists() else None
        await asyncio.sleep(0.1)
    os.kill(int(starts(tmp_path / "starts")[0].split()[0]), signal.SIGTERM)
    code, lines = await sweep
    assert code == 0, lines
    _, rules, runs = await recorded(config)
    assert "cancelled.measured" in rules, rules
    assert [outcome for _, outcome in runs] == ["pass"]
    assert "cancelled outside sweepd" in "\n".join(lines)
