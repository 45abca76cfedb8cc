"""The local backend itself (no engine): submit, poll, cancel, find_by_token, live_tokens,
one job at a time, and a job that ends while no backend (no daemon) is there to see it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    JobRequest,
    JobStatus,
    SchedulerState,
    SubmitRefused,
)
from sweepd.clusters.local import LocalCluster
from sweepd.clusters.local.wrapper import start_ticks
from sweepd.config import LocalConfig
from sweepd.monitor.facts import BannerFact, SummaryFact
from sweepd.monitor.parse import parse_line
from tests.golden_files import GOLDEN, check_golden
from tests.local_trainer import starts, train_command, write_trainer


def _cluster(tmp_path: Path, **env: str) -> LocalCluster:
    trainer = write_trainer(tmp_path)
    settings = LocalConfig(train_command=train_command(trainer), node="box1",
                           lock=tmp_path / "slot.lock",
                           cancel_grace_s=2, workdir=tmp_path,
                           env={"FAKE_STARTS": str(tmp_path / "starts"), **env})
    return LocalCluster(tmp_path / "state", settings)


def _request(tmp_path: Path, token: str, **env: str) -> JobRequest:
    return JobRequest(token=token, model="tiny-llama", nodes=["box1"],
                      output_dir=tmp_path / "out",
                      overrides={"per_device_batch_size": "2", "steps": "15"}, env=env,
                      xla_flags=["--xla_tpu_enable_latency_hiding_scheduler=false"],
                      flags_var="LIBTPU_INIT_ARGS")


def _live_members(pgid: int) -> list[int]:
    """The processes of a group that still run (a zombie awaiting its reaper does not)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


async def _until_finished(cluster: LocalCluster, job_id: str) -> JobStatus:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = (await cluster.poll([job_id]))[job_id]
        if status.state.finished:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} still {status}")


async def test_a_job_runs_to_completion_with_its_overrides_and_flags(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    request = _request(tmp_path, "sw1-aaaa.s1", LIBTPU_INIT_ARGS="--base=1")
    sub = await cluster.submit(request)
    assert await cluster.find_by_token("sw1-aaaa.s1") == sub
    status = await _until_finished(cluster, sub.backend_id)
    assert status.state == SchedulerState.COMPLETED and status.exit_code == 0
    assert status.start is not None and status.end is not None and status.end >= status.start
    log = sub.log_path.read_text()
    assert sub.log_path.name == f"{sub.backend_id}-{sub.job_name}.log"
    assert "JOB_NODELIST=box1" in log and "completed step: 14," in log
    assert "Status: SUCCESS (exit 0)" in log
    # The overrides as key=value after the train command; the run's flags appended to the
    # variable the request names, after what the run's env set there.
    [start] = starts(tmp_path / "starts")
    args = start.split()
    assert args[args.index("per_device_batch_size=2") + 1] == "steps=15"
    assert start.partition(" flags=")[2].split() == ["--base=1", *request.xla_flags]
    assert await cluster.live_tokens() == {}
    assert await cluster.node_states(["box1", "box2"]) == {"box1": "idle",
                                                          "box2": NOT_IN_CLUSTER}


async def test_a_second_job_waits_until_the_first_ends(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, FAKE_STEP_S="0.1")
    first = await cluster.submit(_request(tmp_path, "sw1-aaaa.s1"))
    second = await cluster.submit(_request(tmp_path, "sw1-bbbb.s1"))
    polled = await cluster.poll([first.backend_id, second.backend_id])
    assert polled[first.backend_id].state == SchedulerState.RUNNING
    assert polled[second.backend_id].state == SchedulerState.PENDING
    assert await cluster.node_states(["box1"]) == {"box1": "alloc"}
    assert set((await cluster.live_tokens()).values()) == {"sw1-aaaa.s1", "sw1-bbbb.s1"}
    assert (await cluster.idle_nodes(None)).items == []
    await _until_finished(cluster, first.backend_id)
    assert (await _until_finished(cluster, second.backend_id)).state == \
        SchedulerState.COMPLETED
    # Never two at once: the second started after the first had ended.
    assert len(starts(tmp_path / "starts")) == 2
    first_end = (await cluster.poll([first.backend_id]))[first.backend_id].end
    second_start = (await cluster.poll([second.backend_id]))[second.backend_id].start
    assert first_end is not None and second_start is not None and second_start >= first_end


async def test_cancel_ends_the_trainer_and_its_children(tmp_path: Path) -> None:
    child_file = tmp_path / "child"
    cluster = _cluster(tmp_path, FAKE_MODE="child", FAKE_CHILD=str(child_file))
    sub = await cluster.submit(_request(tmp_path, "sw1-cccc.s1"))
    deadline = time.monotonic() + 30
    while not child_file.exists() or not child_file.read_text():
        assert time.monotonic() < deadline, "the trainer never started its child"
        await asyncio.sleep(0.05)
    trainer_pid = int(starts(tmp_path / "starts")[0].split()[0])
    child_pid = int(child_file.read_text())
    assert start_ticks(trainer_pid) is not None and start_ticks(child_pid) is not None
    await cluster.cancel(sub.backend_id)
    status = await _until_finished(cluster, sub.backend_id)
    assert status.state == SchedulerState.CANCELLED
    # The whole process group is gone: the trainer and the child it started.
    assert start_ticks(trainer_pid) is None and start_ticks(child_pid) is None
    assert _live_members(trainer_pid) == []
    assert "Status: CANCELLED" in sub.log_path.read_text()
    assert await cluster.live_tokens() == {}


async def test_cancel_of_a_queued_job_takes_it_off_the_queue(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, FAKE_MODE="hang")
    running = await cluster.submit(_request(tmp_path, "sw1-dddd.s1"))
    queued = await cluster.submit(_request(tmp_path, "sw1-eeee.s1"))
    await cluster.cancel(queued.backend_id)
    assert (await cluster.poll([queued.backend_id]))[queued.backend_id].state == \
        SchedulerState.CANCELLED
    deadline = time.monotonic() + 30
    while not starts(tmp_path / "starts"):
        assert time.monotonic() < deadline, "the first job never started"
        await asyncio.sleep(0.05)
    await cluster.cancel(running.backend_id)
    assert (await _until_finished(cluster, running.backend_id)).state == \
        SchedulerState.CANCELLED
    assert len(starts(tmp_path / "starts")) == 1   # the queued one never ran


async def test_a_cancel_as_the_job_starts_still_cancels_it(tmp_path: Path) -> None:
    """The cancel comes before the wrapper could take its signal: the marker stops it."""
    cluster = _cluster(tmp_path, FAKE_MODE="hang")
    sub = await cluster.submit(_request(tmp_path, "sw1-iiii.s1"))
    await cluster.cancel(sub.backend_id)
    assert (await _until_finished(cluster, sub.backend_id)).state == SchedulerState.CANCELLED
    assert "Status: CANCELLED" in sub.log_path.read_text()


async def test_a_job_that_ends_while_no_daemon_runs_reads_its_status_after(
        tmp_path: Path) -> None:
    """The backend object (the daemon) goes away mid-job; the job runs on and ends; a new
    backend over the same state directory finds it by its token, with its exit code."""
    cluster = _cluster(tmp_path, FAKE_MODE="oom")
    sub = await cluster.submit(_request(tmp_path, "sw1-ffff.s1"))
    assert (await cluster.poll([sub.backend_id]))[sub.backend_id].state in (
        SchedulerState.RUNNING, SchedulerState.FAILED)
    del cluster
    deadline = time.monotonic() + 30
    while not (tmp_path / "state" / "jobs" / f"{sub.backend_id}.status").exists():
        assert time.monotonic() < deadline, "the job never ended"
        await asyncio.sleep(0.05)
    again = _cluster(tmp_path, FAKE_MODE="oom")
    assert await again.find_by_token("sw1-ffff.s1") == sub
    assert await again.live_tokens() == {}
    status = (await again.poll([sub.backend_id]))[sub.backend_id]
    assert status.state == SchedulerState.FAILED and status.exit_code == 1
    assert "RESOURCE_EXHAUSTED" in sub.log_path.read_text()


async def test_a_running_job_is_seen_running_by_a_new_backend(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, FAKE_MODE="hang")
    sub = await cluster.submit(_request(tmp_path, "sw1-gggg.s1"))
    again = _cluster(tmp_path, FAKE_MODE="hang")
    assert await again.live_tokens() == {sub.backend_id: "sw1-gggg.s1"}
    assert (await again.poll([sub.backend_id]))[sub.backend_id].state == \
        SchedulerState.RUNNING
    await again.cancel(sub.backend_id)
    assert (await _until_finished(again, sub.backend_id)).state == SchedulerState.CANCELLED


async def test_a_request_for_another_node_is_refused(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    request = _request(tmp_path, "sw1-hhhh.s1")
    with pytest.raises(SubmitRefused, match="one node, box1"):
        await cluster.submit(JobRequest(**{**request.__dict__, "nodes": ["box2"]}))
    assert (await cluster.poll(["99"]))["99"].state == SchedulerState.GONE


async def test_node_shell_runs_the_command_here(tmp_path: Path) -> None:
    from sweepd.clusters.node_probe import run_on

    probe = await run_on(_cluster(tmp_path).node_shell(), "box1", "echo here", 10)
    assert probe.ok and probe.out.strip() == "here"


async def _after_last_step(cluster: LocalCluster, tmp_path: Path, job_id: str,
                           log: Path) -> int:
    """The trainer's pid once its log has step 14 (it lingers after it: FAKE_MODE=linger)."""
    deadline = time.monotonic() + 60
    while "completed step: 14," not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the trainer never printed its last step"
        assert (await cluster.poll([job_id]))[job_id].state == SchedulerState.RUNNING
        await asyncio.sleep(0.05)
    return int(starts(tmp_path / "starts")[0].split()[0])


async def test_an_outside_sigterm_after_the_last_step_is_recorded_a_cancel(
        tmp_path: Path) -> None:
    """A person's `kill -TERM` of the trainer: CANCELLED (as Slurm says of a scancel sweepd
    did not send), the status file naming the signal and that it came from outside."""
    cluster = _cluster(tmp_path, FAKE_MODE="linger")
    sub = await cluster.submit(_request(tmp_path, "sw1-jjjj.s1"))
    os.kill(await _after_last_step(cluster, tmp_path, sub.backend_id, sub.log_path),
            signal.SIGTERM)
    status = await _until_finished(cluster, sub.backend_id)
    assert (status.state, status.exit_code) == (SchedulerState.CANCELLED, 143)
    ended = json.loads((tmp_path / "state" / "jobs" / f"{sub.backend_id}.status").read_text())
    assert (ended["signal"], ended["cancelled"], ended["cancelled_by"]) == (15, True,
                                                                             "outside")
    check_golden(GOLDEN / "local_backend" / "cancelled_outside_reason.txt",
                 f"{status.reason}\n")
    assert _ends(sub.log_path.read_text()) == [
        SummaryFact("CANCELLED", None, "SIGTERM from outside sweepd")]


async def test_a_kill_9_is_recorded_killed_by_signal_9(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, FAKE_MODE="linger")
    sub = await cluster.submit(_request(tmp_path, "sw1-kkkk.s1"))
    os.kill(await _after_last_step(cluster, tmp_path, sub.backend_id, sub.log_path),
            signal.SIGKILL)
    status = await _until_finished(cluster, sub.backend_id)
    assert (status.state, status.exit_code) == (SchedulerState.FAILED, 137)
    assert status.reason == "killed by signal 9"   # the fact itself, short
    ended = json.loads((tmp_path / "state" / "jobs" / f"{sub.backend_id}.status").read_text())
    assert (ended["signal"], ended["cancelled"], ended["cancelled_by"]) == (9, False, None)
    log = sub.log_path.read_text()
    # The log says it the toolkit's way: the failed banner with its exit, and the Status.
    [banner] = [f for f in map(parse_line, log.splitlines())
                if isinstance(f, BannerFact) and f.status == "FAILED"]
    assert banner.detail.startswith("exit=137, killed by signal 9,"), banner
    assert _ends(log) == [SummaryFact("FAILED", None, "killed by signal 9")]


def _ends(log: str) -> list[SummaryFact]:
    """The Status lines of a job's log, as the monitor reads them."""
    return [f for f in map(parse_line, log.splitlines()) if isinstance(f, SummaryFact)]


async def test_sweepds_own_cancel_is_recorded_as_sweepds(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, FAKE_MODE="linger")
    sub = await cluster.submit(_request(tmp_path, "sw1-llll.s1"))
    await _after_last_step(cluster, tmp_path, sub.backend_id, sub.log_path)
    await cluster.cancel(sub.backend_id)
    status = await _until_finished(cluster, sub.backend_id)
    assert (status.state, status.reason) == (SchedulerState.CANCELLED, "cancelled by sweepd")
    ended = json.loads((tmp_path / "state" / "jobs" / f"{sub.backend_id}.status").read_text())
    assert (ended["signal"], ended["cancelled_by"]) == (15, "sweepd")


async def test_a_path_in_the_job_name_leaves_the_log_beside_the_others(tmp_path: Path) -> None:
    # Seen on the TPU chip: the xla evidence run's `_env_XLA_FLAGS=--xla_dump_to=/...` put its
    # log nine folders down (`<id>-JAX-...--xla_dump_to_/tmp/.../x.log`). The name keeps the
    # path; the file name reads `_` for each `/`.
    cluster = _cluster(tmp_path)
    sub = await cluster.submit(_request(tmp_path, "sw1-cccc.s1", XLA_FLAGS="--xla_dump_to=/a/b"))
    assert "--xla_dump_to_/a/b" in sub.job_name
    assert sub.log_path.parent == (tmp_path / "out").resolve()
    assert sub.log_path.name == f"{sub.backend_id}-{sub.job_name.replace('/', '_')}.log"
    status = await _until_finished(cluster, sub.backend_id)
    assert status.state == SchedulerState.COMPLETED
    assert "completed step: 14," in sub.log_path.read_text()
