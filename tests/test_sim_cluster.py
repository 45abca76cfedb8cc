"""The simulated cluster backend: submit, poll, queue, cancel, recover after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from sweepd.clusters.base import (
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    SchedulerState,
    SubmitRefused,
)
from sweepd.clusters.sim import SimCluster
from sweepd.monitor.parse import CLUSTER_TIME
from sweepd.sim import logfmt
from tests.support.service import HANG, scenario_file  # noqa: F401


@pytest.fixture
async def make_cluster(tmp_path: Path) -> AsyncIterator[Callable[..., SimCluster]]:
    state = tmp_path / "state"

    def make(faults: list[dict[str, object]] | None = None) -> SimCluster:
        return SimCluster(state, scenario_file(tmp_path, faults))

    yield make
    # Stop every trainer this test started (hung jobs would otherwise run forever).
    for record_path in (state / "jobs").glob("*.json"):
        record = json.loads(record_path.read_text())
        if record["pgid"]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(record["pgid"], signal.SIGKILL)


def request(tmp_path: Path, token: str, nodes: list[str], batch: int = 2,
            **overrides: str) -> JobRequest:
    return JobRequest(token=token, model="llama2-70b", nodes=nodes, output_dir=tmp_path / "out",
                      overrides={"per_device_batch_size": str(batch), "steps": "3", **overrides})


async def wait_for(cluster: SimCluster, job_id: str,
                   done: Callable[[JobStatus], bool]) -> JobStatus:
    for _ in range(1500):
        status = (await cluster.poll([job_id]))[job_id]
        if done(status):
            return status
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} stuck at {status}")


async def past_header(log: Path) -> None:
    header = len(logfmt.header_lines("1", "j", "m", ["n"], []))
    for _ in range(3000):
        if log.exists() and len(log.read_text().splitlines()) > header:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{log}: no line past the header")


def finished(status: JobStatus) -> bool:
    return status.state.finished


async def test_submit_runs_to_completion(tmp_path: Path, make_cluster: Callable[..., SimCluster],
                                         ) -> None:
    cluster = make_cluster()
    sub = await cluster.submit(request(tmp_path, "tok-a1", ["chi2832"]))
    assert "tok-a1" in sub.job_name and sub.job_name.startswith("JAX-llama2-70b-")
    assert sub.log_path == tmp_path / "out" / f"{sub.backend_id}-{sub.job_name}.log"
    status = await wait_for(cluster, sub.backend_id, finished)
    assert status == JobStatus(SchedulerState.COMPLETED, 0)
    assert "completed step: 2," in sub.log_path.read_text()
    assert await cluster.find_by_token("tok-a1") == sub
    assert await cluster.find_by_token("nope") is None
    assert (await cluster.poll(["999999"]))["999999"].state is SchedulerState.GONE


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(e.split("=", 1) for e in raw.split("\0") if "=" in e)


@pytest.mark.parametrize(("own", "expected"), [
    ({}, "--inherited=1 --xla_a=1 --xla_b=2"),                  # the daemon's XLA_FLAGS
    ({"XLA_FLAGS": "--own=1"}, "--own=1 --xla_a=1 --xla_b=2"),  # the run's env sets them
])
async def test_xla_flags_are_added_to_the_trainers_inherited_ones(
        tmp_path: Path, make_cluster: Callable[..., SimCluster], monkeypatch: pytest.MonkeyPatch,
        own: dict[str, str], expected: str) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--inherited=1")
    cluster = make_cluster()
    hung = replace(request(tmp_path, "tok-xla", ["chi2832"], batch=3), env=own,
                   xla_flags=["--xla_a=1", "--xla_b=2"])   # batch 3 hangs: the trainer stays
    sub = await cluster.submit(hung)
    record = json.loads((tmp_path / "state" / "jobs" / f"{sub.backend_id}.json").read_text())
    assert record["xla_flags"] == ["--xla_a=1", "--xla_b=2"]
    assert _environ(record["pid"])["XLA_FLAGS"] == expected


async def test_failed_job_reports_exit_code(tmp_path: Path,
                                            make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster()
    sub = await cluster.submit(request(tmp_path, "tok-oom", ["chi2832"], batch=30))
    assert await wait_for(cluster, sub.backend_id, finished) == JobStatus(SchedulerState.FAILED, 1)


async def test_busy_nodes_queue_fifo_and_cancel(tmp_path: Path,
                                                make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster()
    hung = await cluster.submit(request(tmp_path, "tok-h", ["chi2832", "chi2863"], batch=3))
    waiting = await cluster.submit(request(tmp_path, "tok-w", ["chi2863"]))
    also_waiting = await cluster.submit(request(tmp_path, "tok-w2", ["chi2863"]))
    free = await cluster.submit(request(tmp_path, "tok-f", ["chi2867"]))
    await wait_for(cluster, hung.backend_id, lambda s: s.state is SchedulerState.RUNNING)
    # The trainer takes SIGTERM as a cancel once its log is past the header (a cancel
    # while the process still starts ends it with no exit code, which a loaded machine hit).
    await past_header(hung.log_path)
    assert await cluster.node_states(["chi2832", "chi2867", "chi2868"]) in (
        {"chi2832": "alloc", "chi2867": "alloc", "chi2868": "idle"},
        {"chi2832": "alloc", "chi2867": "idle", "chi2868": "idle"})
    assert await wait_for(cluster, free.backend_id, finished) == JobStatus(
        SchedulerState.COMPLETED, 0)
    states = await cluster.poll([waiting.backend_id, also_waiting.backend_id])
    assert {s.state for s in states.values()} == {SchedulerState.PENDING}
    await cluster.cancel(also_waiting.backend_id)
    await cluster.cancel(hung.backend_id)
    status = await wait_for(cluster, hung.backend_id, lambda s: s.exit_code is not None)
    assert status == JobStatus(SchedulerState.CANCELLED, 143, "scancel")
    assert "CANCELLED (scancel / SIGTERM)" in hung.log_path.read_text()
    assert (await cluster.poll([also_waiting.backend_id]))[also_waiting.backend_id].state is \
        SchedulerState.CANCELLED
    assert (await wait_for(cluster, waiting.backend_id, finished)).state is \
        SchedulerState.COMPLETED
    assert not also_waiting.log_path.exists()


async def test_restart_sees_and_keeps_running_jobs(tmp_path: Path,
                                                   make_cluster: Callable[..., SimCluster]) -> None:
    first = make_cluster()
    running = await first.submit(request(tmp_path, "tok-r", ["chi2832"], steps="40"))
    queued = await first.submit(request(tmp_path, "tok-q", ["chi2832"]))
    await first.close()
    second = make_cluster()
    assert (await second.find_by_token("tok-q")) == queued
    assert (await wait_for(second, running.backend_id, finished)).state is \
        SchedulerState.COMPLETED
    assert (await wait_for(second, queued.backend_id, finished)).state is SchedulerState.COMPLETED
    new = await second.submit(request(tmp_path, "tok-n", ["chi2863"]))
    assert int(new.backend_id) > int(queued.backend_id) > int(running.backend_id)


async def test_unknown_node_is_refused(tmp_path: Path,
                                       make_cluster: Callable[..., SimCluster]) -> None:
    with pytest.raises(SubmitRefused, match="chi9999"):
        await make_cluster().submit(request(tmp_path, "tok-x", ["chi2832", "chi9999"]))


async def test_controller_down_makes_poll_raise_then_recovers(
        tmp_path: Path, make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster([{"kind": "controller_down", "seconds": 600, "times": 1}])
    sub = await cluster.submit(request(tmp_path, "tok-c", ["chi2832"]))
    with pytest.raises(ControllerUnreachable, match="Connection refused"):
        await cluster.poll([sub.backend_id])
    for _ in range(500):      # 600 cluster seconds at 0.0005 = 0.3 s wall
        try:
            await cluster.poll([sub.backend_id])
            break
        except ControllerUnreachable:
            await asyncio.sleep(0.02)
    assert (await wait_for(cluster, sub.backend_id, finished)).state is SchedulerState.COMPLETED
    # The fault was used up: a second job does not take the controller down again.
    again = await cluster.submit(request(tmp_path, "tok-c2", ["chi2832"]))
    assert (await cluster.poll([again.backend_id]))[again.backend_id].state is not \
        SchedulerState.GONE


def cluster_span(log: Path) -> tuple[float, float]:
    found = [m for line in log.read_text().splitlines() if (m := CLUSTER_TIME.match(line))]
    assert len(found) == 1, log.read_text()[-600:]
    return float(found[0][1]), float(found[0][2])


async def test_the_cluster_clock_chains_queued_jobs_whatever_the_machine_took(
        tmp_path: Path, make_cluster: Callable[..., SimCluster]) -> None:
    """Issue 21 item 5: a job starts on the cluster's clock at its submission (the latest
    end by then) or when the job it queued behind ended, and ends its planned duration
    later: never the machine's time, so the gaps the daemon and the machine add vanish."""
    cluster = make_cluster()
    subs = [await cluster.submit(request(tmp_path, f"tok-q{i}", ["chi2832"])) for i in range(3)]
    for sub in subs:
        await wait_for(cluster, sub.backend_id, finished)
    await asyncio.sleep(0.2)   # machine time passes: the cluster's clock does not count it
    later = await cluster.submit(request(tmp_path, "tok-later", ["chi2867"]))
    await wait_for(cluster, later.backend_id, finished)
    spans = [cluster_span(s.log_path) for s in [*subs, later]]
    assert spans[0][0] == 0.0   # the cluster's first job
    for before, after in itertools.pairwise(spans):
        assert after[0] == before[1] and after[1] > after[0]
    # The scheduler starts later jobs from the end the trainer recorded.
    ends = [float((tmp_path / "state" / "jobs" / f"{s.backend_id}.end").read_text())
            for s in [*subs, later]]
    assert [round(e, 3) for e in ends] == [end for _, end in spans]
