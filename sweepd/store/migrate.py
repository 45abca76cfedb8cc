"""Apply the numbered SQL files in `migrations/` at start-up, in one transaction.

An installed wheel carries them inside the package (`sweepd/migrations/`, put there by
the build); a source checkout (an editable install) reads the top-level folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

import sweepd

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class DatabaseTooNew(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def sql_dir() -> Path:
    package = Path(sweepd.__file__).parent
    shipped = package / "migrations"
    return shipped if shipped.is_dir() else package.parent / "migrations"


def migrations() -> list[Migration]:
    found = []
    for entry in sql_dir().iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    expected = list(range(1, len(found) + 1))
    if [m.version for m in found] != expected:
        raise RuntimeError(f"migrations must be numbered 1..n without gaps: {found}")
    return found


def latest_version() -> int:
    return len(migrations())


async def current_version(conn: aiosqlite.Connection) -> int:
    await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    async with conn.execute("SELECT max(version) FROM schema_version") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


async def migrate(conn: aiosqlite.Connection) -> int:
    """Bring the database to the code's version; refuse a database newer than the code."""
    known = migrations()
    await conn.execute("BEGIN IMMEDIATE")
    try:
        have = await current_version(conn)
        if have > len(known):
            raise DatabaseTooNew(
                f"database schema is version {have} but this sweepd knows only up to "
                f"{len(known)}: upgrade sweepd (or restore a backup) before starting it"
            )
        for m in known[have:]:
            # executescript would COMMIT; split so everything stays in this transaction.
            for statement in _statements(m.sql):
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_version (version) VALUES (?)", (m.version,))
        await conn.execute("COMMIT")
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    return len(known)


def _statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]
