"""The daemon, stopped with SIGTERM mid-sweep and started again, finishes the same sweep
with the same result as an uninterrupted run of the same scenario."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from sweepd.cli.client import Client
from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, run, sim_config, write_scenario

SPEC = perf_spec()


def _wait(client: Client, sweep_id: int, until: set[str], timeout: float = 90) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = client.reads.show(sweep_id)
        if shown["state"] in until:
            return shown
        time.sleep(0.1)
    raise AssertionError(f"sweep {sweep_id} still {shown['state']}")


def _table(shown: dict) -> list[tuple[str, str | None, float | None]]:  # type: ignore[type-arg]
    return [(r["label"], r["outcome"], r["tgs"]) for r in shown["run_list"]]


def _interrupted(daemon_dir: Path) -> dict:  # type: ignore[type-arg]
    """The sweep on a daemon stopped with SIGTERM after two passed runs, then started again."""
    daemon = Daemon(daemon_dir, write_config(daemon_dir, write_scenario(daemon_dir)))
    try:
        client = daemon.start()
        sweep_id = int(client.submit(SPEC)["id"])
        deadline = time.monotonic() + 60
        while len([r for r in client.reads.show(sweep_id)["run_list"]
                   if r["state"] == "passed"]) < 2:
            assert time.monotonic() < deadline, "no progress before the stop"
            time.sleep(0.05)
        assert daemon.stop(signal.SIGTERM) == 0  # graceful: exit 0
        assert not (daemon_dir / "sweepd.sock").exists()
        client = daemon.start()
        return _wait(client, sweep_id, {"done", "failed", "awaiting_decision"})
    finally:
        daemon.kill()


async def test_sigterm_mid_sweep_then_restart_finishes_the_same_sweep(tmp_path: Path) -> None:
    reference_dir = tmp_path / "reference"
    reference_dir.mkdir()
    ref_config = sim_config(reference_dir, write_scenario(reference_dir))
    daemon_dir = tmp_path / "daemon"
    daemon_dir.mkdir()
    # The uninterrupted reference (here) and the interrupted daemon's sweep (a thread: its
    # waits block) at once: the simulated cluster's clock times both alike, however loaded.
    reference_run = asyncio.create_task(run(ref_config, SPEC))
    try:
        shown = await asyncio.to_thread(_interrupted, daemon_dir)
    except BaseException:
        reference_run.cancel()
        raise
    code, _ = await reference_run
    assert code == 0
    reference = await _reference(ref_config)
    assert shown["state"] == "done"
    assert _table(shown) == reference["table"]
    assert shown["verdict"] == reference["verdict"]
    # Every job was submitted once: no attempt was repeated by the restart.
    assert len(shown["jobs"]) == reference["jobs"]
    events = [(e["kind"], e["run_id"], e["job_id"], e["to_state"], e["reason"])
              for e in shown["events"]]
    doubled = [e for e in set(events) if events.count(e) > 1]
    assert not doubled, f"recorded twice: {doubled}"


async def _reference(config) -> dict:  # type: ignore[no-untyped-def,type-arg]
    from sweepd.store.store import Store

    store = await Store.open(config.daemon.db_path)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = await store.runs.of_sweep(sweep.id)
        return {"table": [(r.label, r.outcome, r.tgs) for r in runs], "verdict": sweep.verdict,
                "jobs": len(await store.jobs.of_sweep(sweep.id))}
    finally:
        await store.close()
