"""The outbox: SQL for delivering outgoing messages (progress events and digests).

The messages themselves are `progress` events, written in the transaction of the state
change they report; this module only records how far each got. Reads of pending work run
inside `store.tx()` so the notifier never sees (and sends) an event of a transaction that
is still open and may yet roll back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiosqlite

from sweepd.store.store import Store

ItemKind = Literal["event", "digest"]

# Pending events: progress events past the watermark with no rows yet, or with a planned
# chunk (not a hold marker) still unconfirmed. Digests: any unconfirmed chunk, or none yet.
_PENDING = """
SELECT 'event' AS kind, e.id AS id, e.sweep_id AS sweep_id, e.reason AS text,
       e.id * 2 AS position
  FROM events e
 WHERE e.kind = 'progress' AND e.id > ?
   AND (NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
        OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id
                   AND d.delivered_at IS NULL AND d.kind <> 'held'))
UNION ALL
SELECT 'digest', g.id, g.sweep_id, g.body, g.after_event * 2 + 1
  FROM digests g
 WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.digest_id = g.id)
    OR EXISTS (SELECT 1 FROM deliveries d WHERE d.digest_id = g.id AND d.delivered_at IS NULL)
ORDER BY position
LIMIT ?
"""


@dataclass(frozen=True)
class Item:
    """One outgoing message: a progress event or a digest. `position` orders both."""

    kind: ItemKind
    id: int
    sweep_id: int
    text: str
    position: int


@dataclass(frozen=True)
class Part:
    """One planned chunk: what will be sent (decided once, before the first attempt)."""

    kind: Literal["text", "photo"]
    text: str
    parse_mode: str | None = None
    buttons: bool = False


@dataclass(frozen=True)
class Occasion:
    ends_sweep: bool   # the summary of the sweep's end (done, failed, aborted): at once, with
                       # the report, since nothing later would flush it
    by_person: bool    # the answer to a person's own action (a resume): at once


@dataclass(frozen=True)
class Chunk:
    row_id: int
    chunk: int
    of: int
    kind: str
    text: str
    parse_mode: str | None
    buttons: bool
    routine: bool
    message_id: int | None
    delivered_at: float | None
    attempts: int
    last_error: str | None

    @classmethod
    def from_row(cls, r: Any) -> Chunk:
        return cls(r["id"], r["chunk"], r["of"], r["kind"], r["text"], r["parse_mode"],
                   bool(r["buttons"]), bool(r["routine"]), r["message_id"], r["delivered_at"],
                   r["attempts"], r["last_error"])


@dataclass(frozen=True)
class Held:
    event_id: int
    sweep_id: int
    text: str


class Outbox:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _key(self, item: Item) -> tuple[str, int]:
        return ("event_id" if item.kind == "event" else "digest_id", item.id)

    async def pending(self, limit: int = 100) -> list[Item]:
        async with self.store.tx():
            after = int(await self._state("outbox.after_event") or 0)
            rows = await self.store.base.rows(_PENDING, (after, limit))
        return [Item(r["kind"], r["id"], r["sweep_id"], r["text"], r["position"]) for r in rows]

    async def chunks(self, item: Item) -> list[Chunk]:
        column, key = self._key(item)
        rows = await self.store.base.rows(
            f"SELECT * FROM deliveries WHERE {column} = ? AND kind <> 'held' ORDER BY chunk",
            (key,))
        return [Chunk.from_row(r) for r in rows]

    async def plan(self, item: Item, parts: Sequence[Part], routine: bool) -> list[Chunk]:
        """Fix the chunks of a message before its first send; a second call keeps the first
        plan (a restart re-sends exactly what was planned, whatever the code renders now)."""
        column, key = self._key(item)
        async with self.store.tx() as conn:
            for n, part in enumerate(parts, 1):
                await conn.execute(
                    f"INSERT OR IGNORE INTO deliveries ({column}, chunk, of, kind, text,"
                    " parse_mode, buttons, routine) VALUES (?,?,?,?,?,?,?,?)",
                    (key, n, len(parts), part.kind, part.text, part.parse_mode,
                     int(part.buttons), int(routine)))
        return await self.chunks(item)

    async def delivered(self, row_id: int, message_id: int | None, now: float) -> None:
        async with self.store.tx() as conn:
            await conn.execute(
                "UPDATE deliveries SET message_id = ?, delivered_at = ?, attempts = attempts + 1"
                " WHERE id = ? AND delivered_at IS NULL", (message_id, now, row_id))

    async def attempt_failed(self, row_id: int, error: str) -> None:
        async with self.store.tx() as conn:
            await conn.execute(
                "UPDATE deliveries SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                (error, row_id))

    async def abandon(self, row_id: int, error: str, now: float) -> None:
        """A chunk the Bot API refuses for good: done (so it blocks nothing), unconfirmed."""
        async with self.store.tx() as conn:
            await conn.execute(
                "UPDATE deliveries SET attempts = attempts + 1, last_error = ?,"
                " delivered_at = ?, message_id = NULL WHERE id = ?", (error, now, row_id))

    # -- rate limit and digests ------------------------------------------------------------

    async def hold(self, event_id: int) -> None:
        async with self.store.tx() as conn:
            await conn.execute(
                "INSERT OR IGNORE INTO deliveries (event_id, chunk, of, kind, text, routine)"
                " VALUES (?, 0, 0, 'held', '', 1)", (event_id,))

    async def held(self, sweep_id: int | None = None) -> list[Held]:
        sql = ("SELECT e.id, e.sweep_id, e.reason FROM deliveries d JOIN events e"
               " ON e.id = d.event_id WHERE d.kind = 'held' AND d.digested_into IS NULL")
        args: list[Any] = []
        if sweep_id is not None:
            sql += " AND e.sweep_id = ?"
            args.append(sweep_id)
        rows = await self.store.base.rows(sql + " ORDER BY e.id", args)
        return [Held(r[0], r[1], r[2]) for r in rows]

    async def make_digest(self, sweep_id: int, body: str, held: Sequence[Held],
                          now: float) -> Item:
        """One message standing for the held events, ordered right after the last of them."""
        after = max(h.event_id for h in held)
        async with self.store.tx() as conn:
            cur = await conn.execute(
                "INSERT INTO digests (sweep_id, after_event, body) VALUES (?,?,?)",
                (sweep_id, after, body))
            digest_id = int(cur.lastrowid or 0)
            marks = ",".join("?" * len(held))
            await conn.execute(
                f"UPDATE deliveries SET digested_into = ?, delivered_at = ? WHERE kind = 'held'"
                f" AND event_id IN ({marks})", (digest_id, now, *(h.event_id for h in held)))
        return Item("digest", digest_id, sweep_id, body, after * 2 + 1)

    async def routine_sent_since(self, since: float) -> int:
        rows = await self.store.base.rows(
            "SELECT count(*) FROM deliveries WHERE routine = 1 AND chunk = 1"
            " AND delivered_at >= ?", (since,))
        return int(rows[0][0])

    # -- facts the notifier renders from -------------------------------------------------

    async def occasion(self, event_id: int) -> Occasion:
        """What a progress line reports, read off the event written just before it:
        `sweeps.transition` writes the transition, then its progress line, in one transaction."""
        rows = await self.store.base.rows(
            "SELECT kind, run_id, job_id, to_state, rule FROM events WHERE id < ? AND sweep_id ="
            " (SELECT sweep_id FROM events WHERE id = ?) ORDER BY id DESC LIMIT 1",
            (event_id, event_id))
        if not rows:
            return Occasion(ends_sweep=False, by_person=False)
        r = rows[0]
        return Occasion(
            ends_sweep=(r["kind"] == "transition" and r["run_id"] is None and r["job_id"] is None
                        and r["to_state"] in ("done", "failed", "aborted")),
            by_person=str(r["rule"] or "").startswith("person."))

    # -- small persistent state (the getUpdates offset, the watermark) -------------------

    async def _state(self, key: str) -> str | None:
        rows = await self.store.base.rows("SELECT value FROM daemon_state WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def get_state(self, key: str) -> str | None:
        return await self._state(key)

    async def set_state(self, key: str, value: str) -> None:
        async with self.store.tx() as conn:
            await _upsert(conn, key, value)


async def _upsert(conn: aiosqlite.Connection, key: str, value: str) -> None:
    await conn.execute("INSERT INTO daemon_state (key, value) VALUES (?, ?)"
                       " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))
