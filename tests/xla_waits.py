"""Waits the XLA kill -9 tests share: a daemon killed mid Wave 2, then waited to the end."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from sweepd.cli.client import Client

ENDED = {"done", "failed", "awaiting_decision", "aborted"}


def _wave2(shown: dict[str, Any]) -> tuple[int, int]:
    """(finished, open) runs of Wave 2."""
    runs = [r for r in shown["run_list"] if r["params"]["labels"].get("wave") == "2"]
    done = [r for r in runs if r["state"] not in ("pending", "active")]
    return len(done), len(runs) - len(done)


async def until_mid_wave(client: Client, sweep_id: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        done, open_ = _wave2(client.reads.show(sweep_id))
        if done >= 2 and open_ >= 2:
            return
        assert time.monotonic() < deadline, "Wave 2 never got under way"
        await asyncio.sleep(0.02)


def until_ended(client: Client, sweep_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        shown = client.reads.show(sweep_id)
        if shown["state"] in ENDED:
            return dict(shown)
        assert time.monotonic() < deadline, f"sweep still {shown['state']}"
        time.sleep(0.1)


def planned(tmp_path: Path) -> list[dict[str, Any]]:
    """The runs in the store at the kill (read straight from the SQLite file)."""
    with sqlite3.connect(tmp_path / "state" / "sweepd.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT label, state FROM runs")]
