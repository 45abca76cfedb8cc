"""Facts once across a crash (issue 24): a `kill -9` of the daemon mid-wave, the logs of every
job that had ended deleted while it was down, and the restarted daemon finishes the sweep
with the same verdict, each of those jobs' facts as stored before the kill (none re-read,
none lost), and their step time and loss in the report from the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.daemon_proc import Daemon, write_config
from tests.support.xla_sim import (
    FAST,
    env_profile,
    landscape,
    spec,
    write_tuning_scenario,
)
from tests.xla_waits import until_ended as _until_ended
from tests.xla_waits import until_mid_wave as _until_mid_wave


def _ended_jobs(tmp_path: Path) -> dict[int, dict[str, Any]]:
    """The jobs that had ended at the kill, with their stored facts (read straight from the
    SQLite file)."""
    with sqlite3.connect(tmp_path / "state" / "sweepd.db") as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT id, backend_id, log_path, facts_json FROM jobs"
                          " WHERE state IN ('done', 'failed', 'retried')").fetchall()
    return {int(r["id"]): dict(r) for r in rows}


async def test_a_restart_with_the_ended_jobs_logs_deleted_reads_their_facts_from_the_store(
        tmp_path: Path) -> None:
    land = landscape(effects={f"{FAST}=true": {"tgs": 1.10}})
    profiles = [{"name": "fast", "settings": {FAST: "true"}}] + [env_profile(i)
                                                                 for i in range(5)]
    scenario = write_tuning_scenario(tmp_path, land, time_scale=0.001)
    daemon = Daemon(tmp_path, write_config(tmp_path, scenario))
    try:
        client = daemon.start()
        sweep_id = int(client.submit(spec(profiles, stop="thorough"))["id"])
        await _until_mid_wave(client, sweep_id)
        daemon.kill()  # SIGKILL: no clean-up of any kind
        ended = _ended_jobs(tmp_path)
        assert ended and all(j["facts_json"] for j in ended.values())
        for job in ended.values():   # its facts are in the store: the log is not needed
            Path(job["log_path"]).unlink()
        client = daemon.start()
        shown = _until_ended(client, sweep_id)
        rows = client.reads.report(sweep_id)["json"]["rows"]
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    assert (shown["verdict"] or {}).get("recipe") == "fast"
    after = _ended_jobs(tmp_path)
    assert {i: after[i]["facts_json"] for i in ended} == {i: j["facts_json"]
                                                         for i, j in ended.items()}
    # What the report says of the profiles measured only before the kill (their logs
    # deleted) came from their stored facts: each one's step time and loss.
    gone = {j["backend_id"] for j in ended.values()}
    before = [r for r in rows if r["job_ids"] and set(r["job_ids"]) <= gone]
    assert before
    assert [r["profile"] for r in before if r["loss"] is None or r["step_s"] is None] == []
