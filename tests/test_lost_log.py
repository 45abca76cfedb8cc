"""A log that is really gone (no open file left to read: the daemon restarted after it
was deleted or replaced by a directory) is no silence and no failure: the job is judged
by the scheduler, and the person is told (issue 16, item 2)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from sweepd.core.follow import LogFollower
from sweepd.monitor.tail import is_lost
from sweepd.store.store import Store
from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, write_scenario
from tests.support.clock import HandClock
from tests.support.running_job import running_job

# A hang limit far below the job's remaining run: silence unobserved would be "hung".
POLICY = "\n[policy]\nhang_timeout_s = 30\n"
FLOOR = "hang_floor_wall_s = 3\n"


def _running_job(client: object, sweep_id: int) -> dict | None:  # type: ignore[type-arg]
    jobs = client.reads.show(sweep_id)["jobs"]  # type: ignore[attr-defined]
    return next((j for j in jobs if j["state"] == "running" and j["last_step"] is not None),
                None)


async def test_a_log_gone_across_a_restart_is_judged_by_the_scheduler(tmp_path: Path) -> None:
    # A job of ~13 s: seen at its first step (~5 s in), ~8 s left after the kill, well
    # over the 3 s hang floor the restarted daemon would wrongly call a hang.
    scenario = write_scenario(tmp_path, time_scale=0.006)
    config = write_config(tmp_path, scenario, POLICY)
    text = config.read_text().replace("tick_s = 0.1\n", f"tick_s = 0.1\n{FLOOR}")
    config.write_text(text)
    daemon = Daemon(tmp_path, config)
    try:
        client = daemon.start()
        sweep_id = int(client.submit(perf_spec(values=[8], steps=60))["id"])
        deadline = time.monotonic() + 60
        while (job := _running_job(client, sweep_id)) is None:
            assert time.monotonic() < deadline, "the job never ran"
            await asyncio.sleep(0.05)
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
        log = Path(job["log_path"])
        log.unlink()
        log.mkdir()      # not even a file to find later
        client = daemon.start()
        deadline = time.monotonic() + 120
        while (shown := client.reads.show(sweep_id))["state"] not in ("done", "failed",
                                                                "awaiting_decision"):
            assert time.monotonic() < deadline, shown["state"]
            await asyncio.sleep(0.1)
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    first = shown["jobs"][0]
    assert first["state"] == "retried" and first["failure_class"] == "log_lost", first
    rules = [e["rule"] for e in shown["events"]]
    assert "hang.no_output" not in rules and "log.lost_rerun" in rules
    lost = [e for e in shown["events"] if e["rule"] == "log.lost"]
    assert len(lost) == 1 and "not a regular file" in lost[0]["reason"]
    told = [e for e in shown["events"] if e["kind"] == "progress" and "cannot be watched"
            in e["reason"]]
    assert len(told) == 1


# -- a log not there yet (deterministic, the follower over a real store) -----------------

async def _pass(store: Store, follower: LogFollower) -> None:
    """What one engine pass does with the logs: read every job's, store the facts."""
    chunks = await follower.read_chunks(await store.active.jobs())
    await store.jobs.record_logs([c for c in chunks if c is not None])


async def _lost_notes(store: Store, sweep_id: int) -> list[str]:
    return [e.reason for e in await store.events.of_sweep(sweep_id) if e.rule == "log.lost"]


async def test_a_log_not_there_yet_is_not_lost_and_a_later_loss_is_told_once(
        store: Store, tmp_path: Path) -> None:
    # The scheduler says RUNNING before the job's log exists (a slow start on a loaded
    # machine): no loss to tell. This was told, then the real loss across a restart was
    # told a second time (the first lost mark was cleared once the log appeared).
    clock = HandClock(1_000.0)
    log = tmp_path / "job.log"
    sweep_id = await running_job(store, log, clock.now())
    follower = LogFollower(store, clock, missing_grace_s=30)
    await _pass(store, follower)
    assert await _lost_notes(store, sweep_id) == []
    log.write_text("completed step: 1, seconds: 1.0\n")
    await _pass(store, follower)
    assert (await store.active.jobs())[0].log_identity is not None   # seen
    await follower.retain(set())                 # a restart: no file open any more
    log.unlink()
    log.mkdir()
    restarted = LogFollower(store, clock, missing_grace_s=30)
    for _ in range(2):
        await _pass(store, restarted)
    notes = await _lost_notes(store, sweep_id)
    assert len(notes) == 1 and "not a regular file" in notes[0], notes
    await restarted.retain(set())


async def test_a_log_never_there_for_the_hang_limit_is_lost_and_told_once(
        store: Store, tmp_path: Path) -> None:
    clock = HandClock(1_000.0)
    sweep_id = await running_job(store, tmp_path / "never.log", clock.now())
    follower = LogFollower(store, clock, missing_grace_s=30)
    clock.t += 29
    await _pass(store, follower)
    assert await _lost_notes(store, sweep_id) == []
    clock.t += 1
    for _ in range(2):
        await _pass(store, follower)
    notes = await _lost_notes(store, sweep_id)
    assert len(notes) == 1 and "no log file" in notes[0], notes
    assert is_lost((await store.active.jobs())[0].log_identity)


async def test_the_engine_gives_a_log_the_wall_floor_to_appear(tmp_path: Path) -> None:
    # On a fast simulated cluster the hang limit's 3 s wall floor is a few cluster
    # minutes; a burst of job starts on a loaded machine took longer than that for a log
    # to appear, and "its log cannot be read" was told of jobs that were only starting.
    from tests.telegram_double import service_over
    async with service_over(tmp_path) as service:
        engine = service.engine
        grace = engine.log_appear_limit()
        assert engine.config.daemon.log_appear_wall_s == 10.0     # the default
        assert grace >= 10.0 / engine.clock.scale
        assert engine.follower._grace_s == grace    # what its follower tells a loss by
