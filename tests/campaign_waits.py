"""What the campaign's restart tests read of a running daemon's store: a stage under way,
and a bounded wait."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

STAGES = ("health", "batch", "flags", "confirm")
# The stages' sweeps: node health is node perf, then the network check.
SWEEPS = ("health", "network", "batch", "flags", "confirm")
ACTIVE = ("submitting", "queued", "running")


def read_db(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{tmp_path / 'state' / 'sweepd.db'}?mode=ro", uri=True)


def stage_running(tmp_path: Path, campaign: int, stage: str) -> bool:
    """The stage's sweep exists and has a job under way (for confirm: in its own sweep)."""
    with read_db(tmp_path) as db:
        row = db.execute("SELECT child_id FROM campaign_children WHERE campaign_id = ? "
                         "AND stage = ?", (campaign, stage)).fetchone()
        if row is None:
            return False
        n = db.execute(f"SELECT count(*) FROM jobs WHERE sweep_id = ? AND state IN "
                       f"({','.join('?' * len(ACTIVE))})", (row[0], *ACTIVE)).fetchone()[0]
    return bool(n)


def wait_for(what: str, ok: Any, limit_s: float = 150) -> None:
    deadline = time.monotonic() + limit_s
    while not ok():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)
