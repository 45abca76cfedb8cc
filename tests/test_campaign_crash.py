"""A `kill -9` of a real daemon (`sweepd serve`) once in each stage of a campaign on the
simulated cluster: started again each time, the campaign resumes at the stage it was in,
no stage's sweep is made twice, no job is submitted twice or unknown to the store, and the
campaign reaches the verdict the uninterrupted demo reaches with the same scenario."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from sweepd.kinds.campaign.demo import DEMO, SCENARIO
from tests.daemon_proc import Daemon, write_config
from tests.test_campaign_demo import EXPECTED_RECIPE

STAGES = ("health", "batch", "flags", "confirm")
# The stages' sweeps: node health is node perf, then the network check.
SWEEPS = ("health", "network", "batch", "flags", "confirm")
ACTIVE = ("submitting", "queued", "running")


def _db(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{tmp_path / 'state' / 'sweepd.db'}?mode=ro", uri=True)


def _stage_running(tmp_path: Path, campaign: int, stage: str) -> bool:
    """The stage's sweep exists and has a job under way (for confirm: in its own sweep)."""
    with _db(tmp_path) as db:
        row = db.execute("SELECT child_id FROM campaign_children WHERE campaign_id = ? "
                         "AND stage = ?", (campaign, stage)).fetchone()
        if row is None:
            return False
        n = db.execute(f"SELECT count(*) FROM jobs WHERE sweep_id = ? AND state IN "
                       f"({','.join('?' * len(ACTIVE))})", (row[0], *ACTIVE)).fetchone()[0]
    return bool(n)


def _wait(what: str, ok: Any, limit_s: float = 150) -> None:
    deadline = time.monotonic() + limit_s
    while not ok():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


@pytest.mark.timeout(420)
def test_kill_9_in_each_stage_resumes_the_campaign_where_it_was(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, write_config(tmp_path, SCENARIO))
    try:
        client = daemon.start()
        campaign = int(client.submit(DEMO.specs[0])["id"])
        for stage in STAGES:
            _wait(f"stage {stage} under way", lambda s=stage: _stage_running(
                tmp_path, campaign, s))
            daemon.kill()   # SIGKILL: no clean-up of any kind
            client = daemon.start()
        _wait("the campaign's end", lambda: client.show(campaign)["state"] in (
            "done", "failed", "aborted", "awaiting_decision"), 240)
        shown = client.show(campaign)
        child = client.show(shown["stages"][0]["sweep"])
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    # Each stage is one sweep, linked and visible: `show` lists them, a stage names its
    # campaign.
    assert [s["stage"] for s in shown["stages"]] == list(SWEEPS)
    assert all(s["state"] == "done" for s in shown["stages"]), shown["stages"]
    assert child["campaign"] == {"id": campaign, "stage": "health"}
    with _db(tmp_path) as db:
        sweeps = db.execute("SELECT count(*) FROM sweeps").fetchone()[0]
        jobs = db.execute("SELECT run_id, attempt, backend_id FROM jobs").fetchall()
    assert sweeps == 1 + len(SWEEPS)   # no stage started twice across the restarts
    # No job twice: one job per (run, attempt), each scheduler id once, and every job the
    # simulated cluster ran is one the store knows.
    assert len({(r, a) for r, a, _ in jobs}) == len(jobs)
    ids = [str(b) for _, _, b in jobs]
    assert len(ids) == len(set(ids)) and None not in ids
    ran = {p.stem for p in (tmp_path / "state").rglob("jobs/*.json")}
    assert ran == set(ids)
    # The same verdict as the uninterrupted campaign on this scenario.
    verdict = shown["verdict"]
    assert list(verdict["health"]["excluded"]) == ["chi2868"]
    assert verdict["batch"]["best"] == 9
    assert verdict["flags"]["xla_flags"] == EXPECTED_RECIPE
    assert verdict["confirmed"]["claim"].startswith("confirmed gain +")
    assert json.dumps(verdict)   # plain JSON, as the report reads it
