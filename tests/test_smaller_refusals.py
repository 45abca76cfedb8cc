"""Issue 16 item 9: `report --plot` to a bad path, Ctrl-C on `sweepd run`, a refused second
`serve`, and a config typo each get a clear answer, never a traceback or a silent loss."""

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

import pytest

from sweepd.app import foreground
from sweepd.config import ConfigError, load_config
from sweepd.core.states import RunState, SweepState
from sweepd.store.rows import RunParams
from tests.daemon_proc import Daemon as DaemonProc
from tests.daemon_proc import write_config
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import perf_spec, write_scenario
from tests.slurm_cluster import slurm_dir
from tests.support.service import NODES, SPEC, Daemon


def sweepd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120, check=False)


# -- report --plot ----------------------------------------------------------------------------

async def _plottable(d: Daemon) -> int:
    sid = int((await d.service.submit(SPEC))["id"])
    for b, tgs in ((4, 1000.0), (8, 1300.0)):
        run = await d.store.runs.add(sid, f"b={b}",
                                         RunParams(overrides={"per_device_batch_size": b}),
                                         NODES, "t")
        await d.store.runs.transition(run.id, RunState.ACTIVE, "submitting")
        await d.store.runs.transition(run.id, RunState.PASSED, "ran", outcome="pass", tgs=tgs,
                                          mfu=30.0)
    return sid


@pytest.mark.parametrize("where", ["missing", "directory"])
async def test_report_plot_to_a_bad_path_is_one_line_and_exit_2(
        daemon: Daemon, tmp_path: Path, where: str) -> None:
    sid = await _plottable(daemon)
    target = tmp_path / "no-such-dir" / "x.png" if where == "missing" else tmp_path
    code, out, err = await daemon.run("report", str(sid), "--plot", str(target))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    check_golden(GOLDEN / "smaller_refusals" / f"plot_to_{where}.txt", scrubbed(err, tmp=tmp_path))
    code, out, err = await daemon.run("report", str(sid), "--plot", str(target), "--json")
    assert code == 2 and json.loads(out)["exit"] == 2 and err == ""
    good = tmp_path / "x.png"
    code, _, _ = await daemon.run("report", str(sid), "--plot", str(good))
    assert code == 0 and good.read_bytes().startswith(b"\x89PNG")


# -- a config typo ----------------------------------------------------------------------------

def test_a_config_typo_is_one_line_per_problem_with_the_valid_keys(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[daemon]\nstat_dir = "/tmp/x"\ntick_s = "fast"\n[polcy]\n'
                    '[cluster.slurm]\nmdoe = "direct"\n')
    with pytest.raises(ConfigError) as e:
        load_config(path)
    # One line per problem: each typo's nearest key and the section's valid keys, the bad
    # value with what was given; no pydantic wording.
    check_golden(GOLDEN / "cli" / "config_typos.txt", scrubbed(f"{e.value}\n", tmp=tmp_path))
    done = sweepd("serve", "--config", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "daemon.stat_dir: unknown key" in done.stderr


# -- a refused second serve creates nothing ---------------------------------------------------

def test_a_refused_second_serve_creates_no_state_dir(tmp_path: Path) -> None:
    first = DaemonProc(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    first.start()
    try:
        other = tmp_path / "other"
        other.mkdir()
        config = other / "sweepd.toml"   # the same socket, another state directory
        config.write_text(f'[daemon]\nstate_dir = "{other / "state"}"\n'
                          f'socket = "{first.socket}"\n')
        done = sweepd("serve", "--config", str(config))
        assert done.returncode == 1, done.stderr
        check_golden(GOLDEN / "smaller_refusals" / "second_serve.txt",
                     scrubbed(done.stderr, tmp=tmp_path))
        assert not (other / "state").exists()
        same = sweepd("serve", "--config", str(first.config))   # the same state directory
        assert same.returncode == 1 and "another sweepd" in same.stderr
    finally:
        first.stop()
        first.kill()


def test_a_bad_scenario_leaves_no_state_dir(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text('cluster: {nodes: "chi2832", bogus: 1}\n')
    (tmp_path / "spec.yaml").write_text("kind: model-perf\nmodel: llama2-70b\n"
                                        "nodes: chi2832\nvalues: [4]\n")
    done = sweepd("run", str(tmp_path / "spec.yaml"), "--scenario", str(tmp_path / "s.yaml"),
                  "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 2
    assert not (tmp_path / "state").exists()


# -- Ctrl-C on `sweepd run` -------------------------------------------------------------------

def _active_job(db: Path) -> str | None:
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT backend_id FROM jobs WHERE state IN ('queued', 'running') "
                               "AND backend_id IS NOT NULL").fetchone()
    except sqlite3.OperationalError:  # the store is being created and migrated
        return None
    return None if row is None else str(row[0])


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, str]:
    # Slow jobs (time_scale 0.2: a 15-step job takes a while): Ctrl-C lands while one runs.
    scenario = write_scenario(tmp_path, time_scale=0.2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(perf_spec(values=[4, 8])))
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "run", str(spec), "--scenario",
                             str(scenario), "--state-dir", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while (job := _active_job(state / "sweepd.db")) is None:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.1)
    return proc, state, job


def test_ctrl_c_on_run_cancels_its_jobs_and_records_it(tmp_path: Path) -> None:
    proc, state, job = _start_run(tmp_path)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    check_golden(GOLDEN / "smaller_refusals" / "ctrl_c_on_run.txt",
                 scrubbed(out, tmp=tmp_path, job=job))
    with sqlite3.connect(state / "sweepd.db") as conn:
        assert conn.execute("SELECT state FROM sweeps").fetchone()[0] == SweepState.ABORTED
        states = {r[0] for r in conn.execute("SELECT state FROM jobs")}
        rules = [r[0] for r in conn.execute("SELECT reason FROM events WHERE rule = "
                                            "'person.abort'")]
    assert states <= {"cancelled", "passed", "failed"} and "cancelled" in states
    assert any("Ctrl-C" in r for r in rules)
    record = json.loads((state / "sim" / "jobs" / f"{job}.json").read_text())
    assert record.get("cancelled") or record["state"] == "CANCELLED"   # the scheduler was told


async def test_a_second_ctrl_c_leaves_at_once_naming_the_jobs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    left: list[int] = []
    monkeypatch.setattr(os, "_exit", left.append)   # instead of leaving the test run
    lines: list[str] = []
    told: list[str] = []
    with foreground._interrupts(lines.append, 7, ["9801", "9802"], told.append) as interrupted:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(interrupted.wait(), 30)
        assert len(lines) == 1
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(3000):
            if left:
                break
            await asyncio.sleep(0.01)
    assert left == [130] and len(told) == 1
    check_golden_cases(GOLDEN / "cli" / "ctrl_c.txt", {"the first": lines[0],
                                                     "the second": told[0]})


@pytest.mark.slurm
def test_ctrl_c_on_run_cancels_its_slurm_job(tmp_path: Path,
                                             slurm_env: dict[str, str]) -> None:
    """On real Slurm a job outlives `sweepd run`: Ctrl-C must scancel it."""
    scenario = write_scenario(tmp_path, time_scale=0.5)   # a job runs for minutes
    sim = [sys.executable, "-m", "sweepd.sim"]
    config = tmp_path / "slurm.toml"
    config.write_text(
        "[cluster]\nbackend = \"slurm\"\n[cluster.slurm]\nmode = \"direct\"\n"
        f"slurm_conf = \"{slurm_dir() / 'slurm.conf'}\"\n"
        f"train_command = {json.dumps([*sim, 'train', '--scenario', str(scenario), '--state-dir', str(tmp_path / 'sim-state')])}\n"  # noqa: E501
        f"header_command = {json.dumps([*sim, 'header'])}\n"
        f"summary_command = {json.dumps([*sim, 'summary'])}\n"
        "[policy]\nhang_timeout_s = 60\npoll_interval_s = 0.5\ntail_backoff_max_s = 2\n")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(perf_spec(nodes="chi[2832,2863]", values=[4])))
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "run", str(spec), "--config",
                             str(config), "--state-dir", str(state), "--tick", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **slurm_env})
    try:
        deadline = time.monotonic() + 120
        while (job := _active_job(state / "sweepd.db")) is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert f"job(s) {job} cancelled" in out
    shown = ""
    # scancel is asynchronous: the job leaves RUNNING shortly, through COMPLETING (its
    # processes being killed, seen on a loaded CI run) to CANCELLED.
    for _ in range(300):
        shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                               text=True, env={**os.environ, **slurm_env},
                               check=False).stdout
        if not any(f"JobState={s}" in shown for s in ("RUNNING", "PENDING", "COMPLETING")):
            break
        time.sleep(0.2)
    assert "JobState=CANCELLED" in shown, shown
