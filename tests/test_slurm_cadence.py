"""How often sweepd asks Slurm (real cluster): a hung job is cancelled once, not at every
pass until the next poll; a job whose log says it is done but which Slurm still reports
(here: the batch script lingers after its summary, as COMPLETING does) is polled once at
once, then at the poll period. Every Slurm call goes through a wrapper that logs it."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_sweep import SUMMARY, direct_config

pytestmark = pytest.mark.slurm

NODES = "chi[2870,2872]"
POLL_S = 3.0
LINGER_S = 4


def _logging_prefix(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "calls.log"
    wrapper = tmp_path / "log-calls"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, calls


async def test_cancel_once_and_poll_at_the_period(tmp_path: Path,
                                                  slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, [{"kind": "hang", "phase": "training", "times": 1}],
                              time_scale=0.003)
    wrapper, calls = _logging_prefix(tmp_path)
    config = direct_config(tmp_path, scenario, **{
        "policy.poll_interval_s": POLL_S, "policy.hang_timeout_s": 10})
    slurm = config.cluster.slurm
    slurm.command_prefix = [str(wrapper)]
    # The summary is printed, then the job goes on for a while: the log says done first.
    slurm.summary_command = ["sh", "-c", f'"$@"; sleep {LINGER_S}', "summary", *SUMMARY]
    started = time.monotonic()
    code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
    elapsed = time.monotonic() - started
    assert code == EXIT_VERDICT, lines

    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        rules = [e.rule for e in await store.events.of_sweep(1)]
    finally:
        await store.close()
    assert "hang.no_output" in rules and len(jobs) == 2
    made = calls.read_text().splitlines()
    cancels = Counter(c.split()[-1] for c in made if c.startswith("scancel"))
    assert cancels == {jobs[0].backend_id: 1}, cancels
    # Polls: one per period, plus one at once for each job whose log said it was done.
    polls = [c for c in made if c.startswith("squeue") and " -j " in c]
    assert len(polls) <= elapsed / POLL_S + len(jobs) + 2, (len(polls), elapsed)


async def test_first_log_output_records_running(tmp_path: Path,
                                                slurm_env: dict[str, str]) -> None:
    # A poll period far longer than the job: RUNNING can only come from the log.
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003),
                           **{"policy.poll_interval_s": 600})
    code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        job = (await store.jobs.of_sweep(1))[0]
        running = [e for e in await store.events.of_sweep(1)
                   if e.to_state == "running" and e.job_id]
    finally:
        await store.close()
    assert [e.rule for e in running] == ["log.first_output"]
    assert running[0].evidence and running[0].evidence.startswith(f"{job.log_path}: ")
