"""One accelerator is one slot across every sweepd process that uses the local backend on
this machine, whatever its state directory: a daemon's job and a `sweepd run`'s never run at
once. The second waits PENDING and says for whom (pid, state dir, sweep, job), in its status
reason and in the sweep's progress lines (`run`, `watch`, `show`). The slot is held while the
job's wrapper or its trainer runs: a restarted daemon's backend sees it held, a wrapper
killed outright leaves its trainer holding it, and it is free once the trainer has ended."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import yaml

from sweepd.app import foreground
from sweepd.clusters.base import JobRequest, SchedulerState
from sweepd.clusters.local import LocalCluster
from sweepd.clusters.local.wrapper import start_ticks
from sweepd.config import LocalConfig, load_config
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.local_trainer import local_config_text, starts, train_command, write_trainer


def _cluster(tmp_path: Path, state: str, **env: str) -> LocalCluster:
    """A backend over its own state directory, sharing the machine's slot (one lock)."""
    trainer = write_trainer(tmp_path)
    settings = LocalConfig(train_command=train_command(trainer), node="box1",
                           cancel_grace_s=2, workdir=tmp_path, lock=tmp_path / "slot.lock",
                           env={"FAKE_STARTS": str(tmp_path / "starts"), **env})
    return LocalCluster(tmp_path / state / "local", settings)


def _request(tmp_path: Path, token: str) -> JobRequest:
    return JobRequest(token=token, model="tiny-llama", nodes=["box1"],
                      output_dir=tmp_path / "out", overrides={"steps": "15"})


async def _started(tmp_path: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    while len(found := starts(tmp_path / "starts")) < count:
        assert time.monotonic() < deadline, "the trainer never started"
        await asyncio.sleep(0.05)
    return [int(line.split()[0]) for line in found]


async def test_a_second_process_waits_for_the_slot_and_says_for_whom(tmp_path: Path) -> None:
    first = _cluster(tmp_path, "a", FAKE_MODE="hang")
    second = _cluster(tmp_path, "b")
    held = await first.submit(_request(tmp_path, "sw3-aaaa.s1"))
    [trainer] = await _started(tmp_path, 1)
    waiting = await second.submit(_request(tmp_path, "sw7-bbbb.s1"))
    status = (await second.poll([waiting.backend_id]))[waiting.backend_id]
    assert status.state == SchedulerState.PENDING
    assert status.reason is not None and status.reason.startswith("Resources: ")
    wrapper = first.records.pids(held.backend_id)["wrapper"][0]
    assert status.waiting is not None
    check_golden(GOLDEN / "local_one_slot" / "waits_for_the_slot.txt", scrubbed(
        status.waiting + "\n", tmp=tmp_path, pid=f"pid {wrapper}", job=f"job {held.backend_id}"))
    # The daemon of the first goes and comes back: its job still holds the slot.
    del first
    again = _cluster(tmp_path, "a", FAKE_MODE="hang")
    assert (await second.poll([waiting.backend_id]))[waiting.backend_id].state == \
        SchedulerState.PENDING
    # Its wrapper killed outright: the trainer it left still holds the slot.
    os.kill(wrapper, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while start_ticks(wrapper) is not None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert start_ticks(trainer) is not None
    status = (await second.poll([waiting.backend_id]))[waiting.backend_id]
    assert status.state == SchedulerState.PENDING and len(starts(tmp_path / "starts")) == 1
    # Once the trainer has ended (sweepd's cancel), the second starts, and runs to the end.
    await again.cancel(held.backend_id)
    deadline = time.monotonic() + 60
    while (status := (await second.poll([waiting.backend_id]))[waiting.backend_id]).state \
            != SchedulerState.COMPLETED:
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.05)
    assert start_ticks(trainer) is None and len(starts(tmp_path / "starts")) == 2


async def test_sweepd_run_waits_for_a_job_of_another_state_dir_and_says_so(
        tmp_path: Path) -> None:
    """As a daemon's job (state dir a) and `sweepd run` (state dir b) on one chip."""
    other = _cluster(tmp_path, "a", FAKE_MODE="hang")
    held = await other.submit(_request(tmp_path, "sw1-cccc.s1"))
    await _started(tmp_path, 1)
    trainer = write_trainer(tmp_path)
    path = tmp_path / "b.toml"
    path.write_text(local_config_text(tmp_path, trainer, {
        "FAKE_STARTS": str(tmp_path / "starts")}, max_retries=0)
        .replace(str(tmp_path / "state"), str(tmp_path / "b")))
    config = load_config(path)
    spec: dict[str, Any] = yaml.safe_load("kind: model-perf\nmodel: tiny-llama\nvalues: [2]\n")
    lines: list[str] = []
    run = asyncio.create_task(foreground.run_sweep(config, spec, lines.append,
                                                   tell=lines.append))
    deadline = time.monotonic() + 60
    while not any(" waits for the accelerator" in line for line in lines):
        assert not run.done() and time.monotonic() < deadline, lines
        await asyncio.sleep(0.05)
    [line] = [line for line in lines if " waits for the accelerator" in line]
    assert line.startswith("sweep 1: job 1 waits")
    wrapper = other.records.pids(held.backend_id)["wrapper"][0]
    check_golden(GOLDEN / "local_one_slot" / "run_says_it_waits.txt", scrubbed(
        line + "\n", tmp=tmp_path, pid=f"pid {wrapper}", held=f"job {held.backend_id})"))
    assert len(starts(tmp_path / "starts")) == 1   # not two at once
    await other.cancel(held.backend_id)
    assert await asyncio.wait_for(run, 120) == foreground.EXIT_VERDICT, lines
    assert len(starts(tmp_path / "starts")) >= 2
