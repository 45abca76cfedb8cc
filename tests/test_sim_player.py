"""The embedded cluster plans a job when it starts it and a light player writes its log: the
same log the trainer writes for that job, and the trainer still runs when planning fails."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from sweepd.clusters.base import JobRequest, JobStatus, SchedulerState
from sweepd.clusters.sim import SimCluster
from sweepd.sim.__main__ import main
from tests.support.service import scenario_file

FLAKY = {"kind": "hsa_error", "model": "llama2-70b", "batch": 4}


async def _finish(cluster: SimCluster, job_id: str) -> JobStatus:
    for _ in range(1500):
        status = (await cluster.poll([job_id]))[job_id]
        if status.state.finished:
            return status
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish: {status}")


def _request(tmp_path: Path, batch: int) -> JobRequest:
    return JobRequest(token=f"tok-{batch}", model="llama2-70b",
                      nodes=["chi2867", "chi2832"], output_dir=tmp_path / "out",
                      overrides={"per_device_batch_size": str(batch), "steps": "4"},
                      env={"FOO": "bar"})


async def test_a_played_job_writes_the_log_the_trainer_writes(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, [FLAKY])
    cluster = SimCluster(tmp_path / "state", scenario)
    for batch, state in ((3, SchedulerState.COMPLETED), (4, SchedulerState.FAILED)):
        sub = await cluster.submit(_request(tmp_path, batch))
        assert (await _finish(cluster, sub.backend_id)).state is state
        job = json.loads((tmp_path / "state" / "jobs" / f"{sub.backend_id}.plan").read_text())
        # The same job from the trainer's command line, planned in its own process.
        log = tmp_path / f"trainer-{batch}.log"
        code = main(["train", "--scenario", str(scenario), "--model", "llama2-70b",
                     "--job-id", sub.backend_id, "--job-name", sub.job_name,
                     "--nodes", "chi[2832,2867]", "--all-ranks", "--log", str(log),
                     "--state-dir", str(tmp_path / "trainer-state"),
                     "--cluster-start", repr(job["cluster_start"]), "--",
                     f"per_device_batch_size={batch}", "steps=4", "_env_FOO=bar"])
        played = sub.log_path.read_text().splitlines()
        assert played == log.read_text().splitlines()
        assert code == job["plan"]["exit_code"]
        assert (code == 0) == (batch == 3)
        assert any("HSA_STATUS_ERROR" in line for line in played) == (batch == 4)


def test_the_player_imports_no_scenario_and_no_pydantic() -> None:
    probe = ("import sys, sweepd.sim.player; "
             "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'yaml', "
             "'sweepd.sim.scenario'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


async def test_a_job_that_cannot_be_planned_at_start_runs_the_trainer_which_says_why(
        tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, [FLAKY])
    cluster = SimCluster(tmp_path / "state", scenario)
    scenario.write_text("cluster: [not, a, mapping]\n")   # broken after the cluster read it
    sub = await cluster.submit(_request(tmp_path, 3))
    status = await _finish(cluster, sub.backend_id)
    assert status.state is SchedulerState.FAILED
    jobs = tmp_path / "state" / "jobs"
    assert not (jobs / f"{sub.backend_id}.plan").exists()
    assert "invalid scenario" in (jobs / f"{sub.backend_id}.stderr").read_text()
