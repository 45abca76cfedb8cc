"""Migrations build the schema the code expects; enums and CHECK constraints agree."""

from __future__ import annotations

import re
from pathlib import Path

import aiosqlite
import pytest

from sweepd.core.states import JobState, RunState, SweepState
from sweepd.store.migrate import DatabaseTooNew, latest_version, migrate
from sweepd.store.rows import Event, Job, Run, SignalRow, StepRow, Sweep
from sweepd.store.store import Store

TABLES = {"sweeps": Sweep, "runs": Run, "jobs": Job, "events": Event, "steps": StepRow,
          "signals": SignalRow}


async def _columns(conn: aiosqlite.Connection, table: str) -> set[str]:
    async with conn.execute(f"PRAGMA table_info({table})") as cur:
        return {row[1] for row in await cur.fetchall()}


async def test_fresh_database_has_the_schema_the_code_reads(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    assert await migrate(conn) == latest_version()
    for table, row_type in TABLES.items():
        assert await _columns(conn, table) == set(row_type.__dataclass_fields__), table
    async with conn.execute("SELECT version FROM schema_version") as cur:
        assert [r[0] for r in await cur.fetchall()] == list(range(1, latest_version() + 1))
    await conn.close()


async def test_migrating_twice_changes_nothing(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    await migrate(conn)
    await migrate(conn)
    async with conn.execute("SELECT count(*) FROM schema_version") as cur:
        row = await cur.fetchone()
    assert row is not None and row[0] == latest_version()
    await conn.close()


async def test_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    await migrate(conn)
    await conn.execute("INSERT INTO schema_version VALUES (?)", (latest_version() + 1,))
    with pytest.raises(DatabaseTooNew, match="upgrade sweepd"):
        await migrate(conn)
    await conn.close()


@pytest.mark.parametrize(("table", "enum"), [("sweeps", SweepState), ("runs", RunState),
                                             ("jobs", JobState)])
async def test_state_enum_matches_sql_check(store: Store, table: str, enum: type) -> None:
    rows = await store._all("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
    sql = rows[0][0]
    check = re.search(r"state\s+IN\s*\(([^)]*)\)", sql, re.S)
    assert check is not None
    in_sql = set(re.findall(r"'([a-z_]+)'", check.group(1)))
    assert in_sql == {str(s) for s in enum}


async def test_check_constraint_rejects_unknown_state(store: Store) -> None:
    sweep_id = await store.create_sweep("model-perf", "x", {})
    with pytest.raises(Exception, match="CHECK"):
        async with store.tx() as conn:
            await conn.execute("UPDATE sweeps SET state = 'bogus' WHERE id = ?", (sweep_id,))
    assert (await store.sweep(sweep_id)).state == SweepState.QUEUED
