"""A log that is really gone (no open file left to read: the daemon restarted after it
was deleted or replaced by a directory) is no silence and no failure: the job is judged
by the scheduler, and the person is told (issue 16, item 2)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, write_scenario

# A hang limit far below the job's remaining run: silence unobserved would be "hung".
POLICY = "\n[policy]\nhang_timeout_s = 30\n"
FLOOR = "hang_floor_wall_s = 3\n"


def _running_job(client: object, sweep_id: int) -> dict | None:  # type: ignore[type-arg]
    jobs = client.show(sweep_id)["jobs"]  # type: ignore[attr-defined]
    return next((j for j in jobs if j["state"] == "running" and j["last_step"] is not None),
                None)


async def test_a_log_gone_across_a_restart_is_judged_by_the_scheduler(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.01)
    config = write_config(tmp_path, scenario, POLICY)
    text = config.read_text().replace("tick_s = 0.02\n", f"tick_s = 0.02\n{FLOOR}")
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
        while (shown := client.show(sweep_id))["state"] not in ("done", "failed",
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
