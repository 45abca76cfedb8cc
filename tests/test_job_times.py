"""A job's times are the scheduler's, not when the daemon noticed: a job that ends while
the daemon is down is stored with the end Slurm reports, not the restart's time (which
made `show` say "took 42m each" and inflated the ETA). Where the scheduler no longer knows
the job, its log's last write is its end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.clusters.slurm import (
    parse_sacct_times,
    parse_scontrol_job,
    parse_squeue_poll,
    slurm_time,
)
from sweepd.core.jobtimes import job_end
from sweepd.store.rows import Job
from sweepd.util.clock import Clock
from tests.daemon_proc import Daemon
from tests.simrun import perf_spec, write_scenario
from tests.slurm_cluster import slurm_dir
from tests.slurm_sweep import FAST_POLICY, SIM

# -- what the scheduler says --------------------------------------------------------------


def test_squeue_times_are_kept_only_where_they_happened() -> None:
    polled = parse_squeue_poll(
        "7|COMPLETED|0|None|2026-12-02T00:54:33|2026-12-02T00:55:40\n"
        "8|RUNNING|0|None|2026-12-02T00:54:35|2026-12-02T01:54:35\n"   # End: the time limit
        "9|PENDING|0|Resources|2026-12-02T02:00:00|2026-12-02T03:00:00\n"   # a forecast
        "10|PENDING|0|ReqNodeNotAvail, UnavailableNodes:chi2881\n")   # no times asked
    assert polled["7"].start == slurm_time("2026-12-02T00:54:33")
    assert polled["7"].end == slurm_time("2026-12-02T00:55:40")
    assert polled["7"].end is not None and polled["7"].start is not None
    assert polled["7"].end - polled["7"].start == 67
    assert polled["8"].start is not None and polled["8"].end is None
    assert polled["9"].start is None and polled["9"].end is None
    assert polled["9"].reason == "Resources"
    assert polled["10"].reason == "ReqNodeNotAvail, UnavailableNodes:chi2881"


def test_scontrol_and_sacct_times() -> None:
    shown = parse_scontrol_job("JobId=5 JobState=COMPLETED Reason=None ExitCode=0:0 "
                               "StartTime=2026-12-02T00:54:33 EndTime=2026-12-02T00:56:33")
    assert shown is not None and shown.end is not None and shown.start is not None
    assert shown.end - shown.start == 120
    assert parse_sacct_times("2026-12-02T00:54:33|2026-12-02T00:55:33\n") == (
        slurm_time("2026-12-02T00:54:33"), slurm_time("2026-12-02T00:55:33"))
    assert parse_sacct_times("") == (None, None)
    assert slurm_time("Unknown") is None and slurm_time("N/A") is None


def _job(log: Path | None, submitted_at: float) -> Job:
    return Job(id=1, run_id=1, sweep_id=1, attempt=1, token="t", job_name="n", nodes="chi1",
               backend_id="5", log_path=str(log) if log else None, state="running",
               scheduler_state=None, submitted_at=submitted_at, ended_at=None, log_offset=0,
               log_identity=None, last_output_at=None, phase="", last_step=None, profiler=0,
               mem_used_gb=None, mem_limit_gb=None, summary_status=None, summary_exit=None,
               node_map_json=None, tgs=None, mfu=None, failure_class=None,
               failure_node=None, failure_line=None, failure_detail=None,
               submit_deadline=None)


def test_the_end_is_the_schedulers_else_the_logs_for_a_job_it_forgot(tmp_path: Path) -> None:
    clock = Clock(1.0)
    now = clock.now()
    log = tmp_path / "5-job.log"
    log.write_text("  Status: SUCCESS (exit 0)\n")
    os.utime(log, (now - 3000, now - 3000))   # its last line was written 50 min ago
    job = _job(log, submitted_at=now - 4000)
    done = JobStatus(SchedulerState.COMPLETED, 0, end=now - 3100)
    assert job_end(clock, job, done) == (now - 3100, "scheduler")
    # The controller forgot it and there is no accounting: the log's last write.
    gone = JobStatus(SchedulerState.GONE)
    assert job_end(clock, job, gone) == (now - 3000, "log")
    # Neither: when it was noticed (never earlier than the submission).
    at, source = job_end(clock, _job(None, now - 4000), gone)
    assert source == "noticed" and at >= now
    early = JobStatus(SchedulerState.COMPLETED, 0, end=now - 9000)   # a skewed clock
    assert job_end(clock, job, early) == (now - 4000, "scheduler")
    # A simulated cluster's clock runs faster: the scheduler's wall time is scaled.
    fast = Clock(0.01)
    assert job_end(fast, _job(None, 0.0), JobStatus(SchedulerState.COMPLETED, 0,
                                                    end=now - 100))[0] == (now - 100) / 0.01


# -- a job that ends while the daemon is down (real Slurm) ---------------------------------

def _toml(tmp_path: Path, scenario: Path) -> Path:
    slurm = {
        "mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
        "train_command": [*SIM, "train", "--scenario", str(scenario),
                          "--state-dir", str(tmp_path / "sim-state")],
        "header_command": [*SIM, "header"], "summary_command": [*SIM, "summary"],
    }
    policy = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in FAST_POLICY.items())
    lines = ["[daemon]", f'state_dir = "{tmp_path / "state"}"',
             f'socket = "{tmp_path / "sweepd.sock"}"', "tick_s = 0.05", "",
             "[cluster]", 'backend = "slurm"', "", "[cluster.slurm]",
             *(f"{k} = {json.dumps(v)}" for k, v in slurm.items()), "", "[policy]", policy]
    path = tmp_path / "sweepd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobs(db: Path) -> list[tuple[str, str, float | None, float | None]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT backend_id, state, submitted_at, ended_at FROM jobs"
                            " ORDER BY id").fetchall()
    finally:
        conn.close()


def _slurm_job(job_id: str, env: dict[str, str]) -> tuple[str, float | None]:
    out = subprocess.run(["squeue", "-h", "--states=all", "-j", job_id, "-O",
                          "State:|,EndTime:"], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True).stdout.strip()
    state, _, end = out.partition("|")
    return state.strip(), slurm_time(end) if state.strip() == "COMPLETED" else None


@pytest.mark.slurm
@pytest.mark.timeout(300)
async def test_a_job_that_ended_while_the_daemon_was_down_keeps_slurms_end(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.01)   # a job of ~10 s
    daemon = Daemon(tmp_path, _toml(tmp_path, scenario))
    db = tmp_path / "state" / "sweepd.db"
    try:
        client = daemon.start()
        sweep = int(client.submit(perf_spec(nodes="chi2870", values=[4]))["id"])
        deadline = time.monotonic() + 120
        while not any(j[1] == "running" for j in _jobs(db)):
            assert time.monotonic() < deadline, _jobs(db)
            await asyncio.sleep(0.1)
        daemon.stop(signal.SIGKILL)
        job_id = _jobs(db)[0][0]
        while (found := _slurm_job(job_id, slurm_env))[0] != "COMPLETED":
            assert time.monotonic() < deadline, found
            await asyncio.sleep(0.2)
        slurm_end = found[1]
        # Down a while after the job ended: noticed at the restart, it would be timed to it.
        await asyncio.sleep(4)
        restarted = time.time()
        client = daemon.start()
        while client.reads.show(sweep)["state"] not in ("done", "failed", "awaiting_decision"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
    finally:
        daemon.kill()
    (backend_id, state, submitted_at, ended_at), = _jobs(db)
    assert state == "done" and backend_id == job_id
    assert slurm_end is not None and ended_at == slurm_end   # Slurm's EndTime, to the second
    assert ended_at < restarted   # not when the restarted daemon noticed
    assert submitted_at is not None and ended_at - submitted_at < restarted - submitted_at - 3
