"""What the campaign's restart tests read of a running daemon's store: a stage under way,
a bounded wait, and the decisions of a finished campaign's verdict (to compare two runs)."""

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


def decisions(verdict: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Every decision in a finished campaign's verdict, without the measured figures (TGS,
    deltas, gains and intervals: their noise is seeded by the Slurm job ids): what two runs
    of one scenario and seed must agree on exactly. `candidate`: what the confirm stage
    was given."""
    health = verdict.get("health") or {}

    def claim(c: dict[str, Any] | None) -> str | None:
        if not c or not c.get("interval"):
            return None
        low, high = c["interval"]
        return "gain" if low > 0 else "slower" if high < 0 else "within noise"

    return {
        "stages": verdict["stages"], "skipped": verdict["skipped"], "nodes": verdict["nodes"],
        # A node's band, not its measured delta ("degraded (-7.1% vs the median)").
        "excluded": {n: why.split(" (")[0] for n, why in health.get("excluded", {}).items()},
        "network": health.get("network"), "candidate": candidate,
        "cells": [{"parallelism": c["parallelism"], "nodes": c["nodes"],
                   "batch": (c.get("batch") or {}).get("best"),
                   "flags": {k: (c.get("flags") or {}).get(k)
                             for k in ("verdict", "profile", "xla_flags", "env")},
                   "confirmed": claim(c.get("confirmed"))} for c in verdict["cells"]]}
