"""A `kill -9` of the daemon in the middle of an xla-tuning wave (a real `sweepd serve`
subprocess on the simulated cluster): started again, it finishes the same sweep with no
job submitted twice and no profile lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sweepd.cli.client import Client
from tests.daemon_proc import Daemon, write_config
from tests.test_xla_tuning_sweep_sim import (
    FAST,
    env_profile,
    landscape,
    spec,
    write_tuning_scenario,
)

ENDED = {"done", "failed", "awaiting_decision", "aborted"}


def _wave2(shown: dict[str, Any]) -> tuple[int, int]:
    """(finished, open) runs of Wave 2."""
    runs = [r for r in shown["run_list"] if r["params"]["wave"] == "2"]
    done = [r for r in runs if r["state"] not in ("pending", "active")]
    return len(done), len(runs) - len(done)


async def _until_mid_wave(client: Client, sweep_id: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        done, open_ = _wave2(client.show(sweep_id))
        if done >= 2 and open_ >= 2:
            return
        assert time.monotonic() < deadline, "Wave 2 never got under way"
        await asyncio.sleep(0.02)


def _until_ended(client: Client, sweep_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        shown = client.show(sweep_id)
        if shown["state"] in ENDED:
            return dict(shown)
        assert time.monotonic() < deadline, f"sweep still {shown['state']}"
        time.sleep(0.1)


async def test_kill_9_mid_wave_resumes_without_a_duplicate_or_a_lost_profile(
        tmp_path: Path) -> None:
    land = landscape(effects={f"{FAST}=true": {"tgs": 1.10}})
    profiles = [{"name": "fast", "settings": {FAST: "true"}}] + [env_profile(i)
                                                                 for i in range(9)]
    scenario = write_tuning_scenario(tmp_path, land, time_scale=0.001)
    daemon = Daemon(tmp_path, write_config(tmp_path, scenario))
    try:
        client = daemon.start()
        # thorough: every catalog profile is measured before the winner rule (the seed
        # mode may stop on `fast` first; this test checks that none is lost).
        sweep_id = int(client.submit(spec(profiles, stop="thorough"))["id"])
        await _until_mid_wave(client, sweep_id)
        daemon.kill()  # SIGKILL: no clean-up of any kind
        before = {r["label"] for r in _planned(tmp_path)}
        client = daemon.start()
        shown = _until_ended(client, sweep_id)
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    assert (shown["verdict"] or {}).get("recipe") == "fast"
    runs, jobs = shown["run_list"], shown["jobs"]
    # No duplicate: one job per run (no flakes in this landscape), each scheduler id once,
    # and no profile planned twice for the same repeat.
    per_run: dict[int, int] = {}
    for j in jobs:
        per_run[j["run_id"]] = per_run.get(j["run_id"], 0) + 1
    assert all(n == 1 for n in per_run.values()), per_run
    ids = [j["backend_id"] for j in jobs]
    assert len(ids) == len(set(ids))
    labels = [r["label"] for r in runs]
    assert len(labels) == len(set(labels))
    # No lost profile: every run planned before the kill ended with a result, and every
    # profile of the catalog was measured.
    by_label = {r["label"]: r for r in runs}
    assert before <= set(by_label)
    assert all(by_label[label]["outcome"] == "pass" for label in before), \
        [(label, by_label[label]["state"]) for label in before]
    measured = {r["params"]["profile"] for r in runs if r["outcome"] == "pass"}
    assert {p["name"] for p in profiles} <= measured


def _planned(tmp_path: Path) -> list[dict[str, Any]]:
    """The runs in the store at the kill (read straight from the SQLite file)."""
    import sqlite3

    with sqlite3.connect(tmp_path / "state" / "sweepd.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT label, state FROM runs")]
