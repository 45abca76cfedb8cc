"""Migrations build the schema the code expects; enums and CHECK constraints agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiosqlite
import pytest

from sweepd.core.states import JobState, RunState, SweepState
from sweepd.store.migrate import (
    DatabaseTooNew,
    _statements,
    current_version,
    latest_version,
    migrate,
    migrations,
)
from sweepd.store.rows import Event, Expected, Job, Run, RunParams, SignalRow, StepRow, Sweep
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
    rows = await store.base.rows("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
    sql = rows[0][0]
    check = re.search(r"state\s+IN\s*\(([^)]*)\)", sql, re.S)
    assert check is not None
    in_sql = set(re.findall(r"'([a-z_]+)'", check.group(1)))
    assert in_sql == {str(s) for s in enum}


async def test_check_constraint_rejects_unknown_state(store: Store) -> None:
    sweep_id = await store.sweeps.create("model-perf", "x", {})
    with pytest.raises(Exception, match="CHECK"):
        async with store.tx() as conn:
            await conn.execute("UPDATE sweeps SET state = 'bogus' WHERE id = ?", (sweep_id,))
    assert (await store.sweeps.get(sweep_id)).state == SweepState.QUEUED


# Run params as version 5 stored them: magic `_` keys beside the MaxText overrides.
OLD_PARAMS = {
    "sweep": {"_model": "llama2-70b", "_commit": "0a1b2c3", "_tag": "main", "steps": 15,
              "dataset_type": "synthetic"},
    "node": {"_alias": "chi2832", "dataset_type": "synthetic"},
    "network": {"_expected_tgs": 1225.0, "_expected_source": "node perf sweep 4",
                "dataset_type": "synthetic"},
    "no reference": {"_expected_tgs": None, "_expected_source": "the best group seen"},
    "env": {"_env_XLA_PYTHON_CLIENT_MEM_FRACTION": 0.85, "per_device_batch_size": 8,
            "remat_policy": "full"},
    "empty": {},
}


async def _database_at_version_5(path: Path) -> None:
    conn = await aiosqlite.connect(path, isolation_level=None)
    await current_version(conn)   # creates schema_version
    for m in migrations()[:5]:
        for statement in _statements(m.sql):
            await conn.execute(statement)
        await conn.execute("INSERT INTO schema_version (version) VALUES (?)", (m.version,))
    await conn.execute("INSERT INTO sweeps (kind, name, spec_json) "
                       "VALUES ('model-perf', 'x', '{}')")
    for seq, (label, params) in enumerate(OLD_PARAMS.items(), 1):
        await conn.execute("INSERT INTO runs (sweep_id, seq, label, params_json, nodes) "
                           "VALUES (1, ?, ?, ?, 'chi2832')", (seq, label, json.dumps(params)))
    await conn.close()


async def test_version_6_rewrites_old_run_params_into_the_typed_shape(tmp_path: Path) -> None:
    await _database_at_version_5(tmp_path / "db")
    store = await Store.open(tmp_path / "db")   # migrates to the latest version
    try:
        params = {r.label: r.params for r in await store.runs.of_sweep(1)}
    finally:
        await store.close()
    assert params["sweep"] == RunParams(model="llama2-70b", commit="0a1b2c3", tag="main",
                                        overrides={"steps": 15, "dataset_type": "synthetic"})
    assert params["node"] == RunParams(alias="chi2832", overrides={"dataset_type": "synthetic"})
    assert params["network"] == RunParams(
        expected=Expected(tgs=1225.0, source="node perf sweep 4"),
        overrides={"dataset_type": "synthetic"})
    assert params["no reference"] == RunParams(
        expected=Expected(tgs=None, source="the best group seen"))
    # A swept environment variable is text now, as the job always received it.
    assert params["env"] == RunParams(env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.85"},
                                      overrides={"per_device_batch_size": 8,
                                                 "remat_policy": "full"})
    assert params["empty"] == RunParams()
    assert all(isinstance(p.overrides.get("per_device_batch_size", 0), int)
               for p in params.values())


async def test_version_7_shows_old_rerun_cancels_as_cancelled(tmp_path: Path) -> None:
    """Before version 7 a job cancelled outside sweepd and run again was stored `retried`;
    a job retried for a fault stays `retried`."""
    await _database_at_version_5(tmp_path / "db")
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    for seq, klass in enumerate(("cancelled", "hang", None), 1):
        await conn.execute(
            "INSERT INTO jobs (run_id, sweep_id, attempt, token, job_name, nodes, state, "
            "failure_class) VALUES (1, 1, ?, ?, 'j', 'chi2832', ?, ?)",
            (seq, f"t{seq}", "retried" if klass else "done", klass))
    await conn.close()
    store = await Store.open(tmp_path / "db")
    try:
        states = [(j.failure_class, j.state) for j in await store.jobs.of_sweep(1)]
    finally:
        await store.close()
    assert states == [("cancelled", JobState.CANCELLED), ("hang", JobState.RETRIED),
                      (None, JobState.DONE)]


async def test_version_11_moves_an_old_runs_wave_into_its_labels(tmp_path: Path) -> None:
    """Before version 11 a run's params carried the XLA tuning kind's wave as a field of the
    shared row (`"wave": "2"`, or null for every other kind's run); such a row still loads,
    its wave under `labels`, where the kind reads it, and nothing else changed."""
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    await current_version(conn)
    for m in migrations()[:10]:
        for statement in _statements(m.sql):
            await conn.execute(statement)
        await conn.execute("INSERT INTO schema_version (version) VALUES (?)", (m.version,))
    await conn.execute("INSERT INTO sweeps (kind, name, spec_json) "
                       "VALUES ('xla-tuning', 'x', '{}')")
    same = {"env": {"NCCL_NCHANNELS_PER_NET_PEER": "8"}, "overrides": {"steps": 15},
            "time_limit": "45:00", "xla_flags": ["--xla_gpu_enable_latency_hiding_scheduler=true"]}
    shared = {"alias": None, "commit": None, "expected": None, "model": None, **same}
    old = {"tuned": {**shared, "profile": "lhs", "tag": "sparse", "wave": "2"},
           "other kind": {**shared, "profile": None, "tag": None, "wave": None}}
    for seq, (label, params) in enumerate(old.items(), 1):
        await conn.execute("INSERT INTO runs (sweep_id, seq, label, params_json, nodes) "
                           "VALUES (1, ?, ?, ?, 'chi2832')", (seq, label, json.dumps(params)))
    await conn.close()
    store = await Store.open(tmp_path / "db")
    try:
        params = {r.label: r.params for r in await store.runs.of_sweep(1)}
    finally:
        await store.close()
    assert params["tuned"] == RunParams(profile="lhs", tag="sparse", labels={"wave": "2"}, **same)
    assert params["other kind"] == RunParams(**same)
    assert params["other kind"].labels == {}
