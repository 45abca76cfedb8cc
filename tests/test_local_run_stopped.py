"""Every way `sweepd run` ends cancels its job on the local backend and says so in one line
on stderr, recorded as the person's abort as Ctrl-C is: SIGTERM and SIGHUP (a `kill`, a
closed terminal) as well as Ctrl-C, and an error while it drives the sweep. Before, SIGTERM
and SIGHUP left the trainer running with parent pid 1, and nothing said."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.app import foreground
from sweepd.clusters.local.wrapper import start_ticks
from sweepd.config import load_config
from tests.golden_files import GOLDEN, check_golden
from tests.local_trainer import local_config_text, starts, write_trainer

ROOT = Path(__file__).parents[1]


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    trainer = write_trainer(tmp_path)
    config = tmp_path / "sweepd.toml"
    config.write_text(local_config_text(tmp_path, trainer, {
        "FAKE_STARTS": str(tmp_path / "starts"), "FAKE_MODE": "hang"}, hang_timeout_s=600))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"kind": "model-perf", "model": "tiny-llama",
                                    "name": "tiny", "values": [2]}))
    return config, spec


def _trainer_pid(tmp_path: Path) -> int:
    deadline = time.monotonic() + 60
    while not (found := starts(tmp_path / "starts")):
        assert time.monotonic() < deadline, "the trainer never started"
        time.sleep(0.05)
    return int(found[0].split()[0])


def _gone(pid: int) -> None:
    deadline = time.monotonic() + 30   # the wrapper's grace period, then SIGKILL
    while start_ticks(pid) is not None:
        assert time.monotonic() < deadline, f"trainer {pid} outlived `sweepd run`"
        time.sleep(0.1)


def _aborts(state: Path) -> list[str]:
    with sqlite3.connect(state / "sweepd.db") as conn:
        return [r[0] for r in conn.execute(
            "SELECT reason FROM events WHERE rule = 'person.abort' AND to_state = 'aborted'")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_run_ended_by_a_signal_cancels_its_job_and_says_so(tmp_path: Path,
                                                           sig: signal.Signals) -> None:
    config, spec = _setup(tmp_path)
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "run", "--config", str(config),
                             "--state-dir", str(state), str(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        trainer = _trainer_pid(tmp_path)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, out + err
    # One line on stderr names the signal, the job and what was done.
    # One golden case per signal: the line names it.
    check_golden(GOLDEN / "local_run_stopped" / f"ended_by_{sig.name}.txt",
                 err.strip().splitlines()[-1] + "\n")
    assert "Traceback" not in err
    _gone(trainer)
    [reason] = _aborts(state)
    assert sig.name in reason
    status = json.loads((state / "local" / "jobs" / "1.status").read_text())
    assert status["cancelled"] is True


async def test_an_error_while_driving_the_sweep_cancels_its_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_path, spec_path = _setup(tmp_path)
    config = load_config(config_path)
    spec: dict[str, Any] = yaml.safe_load(spec_path.read_text())
    real_first_of = foreground.first_of

    async def breaks_once_the_job_runs(timeout_s: float, *events: asyncio.Event) -> None:
        if starts(tmp_path / "starts"):
            raise RuntimeError("the engine broke")
        await real_first_of(timeout_s, *events)

    monkeypatch.setattr(foreground, "first_of", breaks_once_the_job_runs)
    told: list[str] = []
    with pytest.raises(RuntimeError, match="the engine broke"):
        await foreground.run_sweep(config, spec, lambda _: None, tell=told.append)
    check_golden(GOLDEN / "local_run_stopped" / "engine_broke.txt", "".join(
        f"{line}\n" for line in told))
    _gone(_trainer_pid(tmp_path))
    [reason] = _aborts(config.daemon.state_dir)
    assert "the engine broke" in reason
