"""The facts a sweep's kind wants from each of its jobs (`Kind.job_facts`), kept in the
store so that nothing reads a job's log or its files twice for them.

They are one JSON object per job (`jobs.facts_json`, migration 8), on the job row itself:
every reader of a sweep's jobs (its gather, planner, report, stop message) reads them with
the rows it already reads, a restarted daemon reads them back, and the log pass writes them
in the transaction that moves the log's offset (`LogChunk.fields`), so facts and offset
never disagree. What ends a job's facts (a file the job wrote, read once at its end) is
written here, before the job is judged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sweepd.store.base import StoreBase
from sweepd.store.rows import Job


def facts_text(facts: Mapping[str, Any]) -> str:
    """The stored form: compact JSON, keys sorted (the same facts, the same text)."""
    return json.dumps(facts, sort_keys=True, separators=(",", ":"))


class FactsTable:
    """Kind facts per job, and which kind each sweep is (to find a job's extractor)."""

    def __init__(self, base: StoreBase) -> None:
        self._base = base

    async def store(self, job_id: int, facts: Mapping[str, Any]) -> None:
        """The job's facts as a whole (the caller folded them with what was stored)."""
        try:
            async with self._base.tx() as conn:
                await conn.execute("UPDATE jobs SET facts_json = ? WHERE id = ?",
                                   (facts_text(facts), job_id))
        finally:
            self._base.written([job_id])

    async def sweep_kinds(self, sweep_ids: Iterable[int]) -> dict[int, str]:
        """Each sweep's kind, in one query (a kind never changes once a sweep exists)."""
        wanted = sorted(set(sweep_ids))
        if not wanted:
            return {}
        rows = await self._base.rows("SELECT id, kind FROM sweeps WHERE id IN"
                                     " (SELECT value FROM json_each(?))", (json.dumps(wanted),))
        return {int(r["id"]): str(r["kind"]) for r in rows}

    async def ended_without_facts(self, kinds: Sequence[str], states: Sequence[str]
                                  ) -> list[Job]:
        """Jobs of these kinds' sweeps, in these (ended) states, with no facts stored: those
        that ended before their kind's facts were kept (a store from before version 8)."""
        if not kinds:
            return []
        rows = await self._base.rows(
            "SELECT * FROM jobs WHERE facts_json IS NULL"
            " AND state IN (SELECT value FROM json_each(?))"
            " AND sweep_id IN (SELECT id FROM sweeps WHERE kind IN"
            " (SELECT value FROM json_each(?))) ORDER BY id",
            (json.dumps(list(states)), json.dumps(list(kinds))))
        return [Job.from_row(r) for r in rows]
