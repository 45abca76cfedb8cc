"""The kinds' per-job facts (`Kind.job_facts`), extracted once and kept in the store.

The log pass folds each batch of a job's new lines into its facts (`fold`), stored in the
transaction that moves the log's offset; when the job ends, before it is judged, the kind
completes them once from what the job left besides its log (`ended`, e.g. the XLA tuning
kind's HLO dump). The kind's gather, planner and report then read them from the job rows
(`Job.facts`): no log is read again for them, and a restarted daemon reads them back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from sweepd.kinds.api import EndedJob, Facts, JobFacts
from sweepd.kinds.registry import kinds
from sweepd.store.facts import facts_text
from sweepd.store.rows import Job
from sweepd.store.states import JobState

log = structlog.get_logger("sweepd.core.kind_facts")

if TYPE_CHECKING:
    from sweepd.store.store import Store

_TEXT = itemgetter(1)   # a line's text, of (offset, text)


def hook_of(kind: str | None) -> JobFacts | None:
    found = kinds().get(kind or "")
    return None if found is None else found.job_facts


class KindFacts:
    """Each followed job's extractor (its sweep's kind's), and the fold of its new lines."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # sweep id -> its kind's extractor; a sweep's kind never changes, so it is kept.
        self._hooks: dict[int, JobFacts | None] = {}

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Know the extractor of every job's sweep: one query for sweeps not seen yet."""
        new = {j.sweep_id for j in jobs} - self._hooks.keys()
        if new:
            found = await self._store.facts.sweep_kinds(new)
            self._hooks.update({s: hook_of(found.get(s)) for s in new})

    def fold(self, job: Job, lines: Sequence[tuple[int, str]], fields: dict[str, Any]) -> None:
        """The job's facts with these lines folded in, into the chunk's fields (stored with
        its offset); nothing when its kind wants none or the lines add nothing."""
        hook = self._hooks.get(job.sweep_id)
        if hook is None or not lines:
            return
        # Called for every log with new lines, thousands a pass: no JSON to read while the
        # job has no facts yet (the usual running job), the texts taken without a loop.
        new = hook.lines(job.facts if job.facts_json else {}, list(map(_TEXT, lines)))
        if new is not None:
            fields["facts_json"] = facts_text(new)


async def job_ended(store: Store, kind: str, job: Job) -> Job:
    """The kind's end-of-job facts, stored before the job is judged; the job as stored.
    Run in a worker thread: it may read a large file (an HLO dump)."""
    hook = hook_of(kind)
    if hook is None or hook.ended is None:
        return job
    run = await store.runs.get(job.run_id)
    ended = EndedJob(job, run.params, await store.jobs.steps(job.id))
    new = await asyncio.to_thread(hook.ended, ended)
    if new is None:
        return job
    await store.facts.store(job.id, new)
    return await store.jobs.get(job.id)


# A job whose conclusion the kind's readers use (a cancelled one says nothing).
_ENDED = (JobState.DONE, JobState.FAILED, JobState.RETRIED)


async def backfill(store: Store) -> int:
    """Facts for jobs that ended before their kind's facts were kept (a store from before
    schema version 8): each such log read once, whole, and its end facts added, so that
    every reader finds them in the store as for any other job. Facts are stored even when
    none are found (`{}`): a job is backfilled once. Returns how many jobs were."""
    hooked = {name: k.job_facts for name, k in kinds().items() if k.job_facts is not None}
    jobs = await store.facts.ended_without_facts(sorted(hooked), [str(s) for s in _ENDED])
    if not jobs:
        return 0
    by_sweep = await store.facts.sweep_kinds({j.sweep_id for j in jobs})
    for job in jobs:
        hook = hooked[by_sweep[job.sweep_id]]
        facts = await asyncio.to_thread(_from_whole_log, hook, job.log_path)
        await store.facts.store(job.id, facts)
        done = await job_ended(store, by_sweep[job.sweep_id], await store.jobs.get(job.id))
        if done.facts_json is None:
            await store.facts.store(job.id, {})
    log.info("kind_facts.backfilled", jobs=len(jobs))
    return len(jobs)


def _from_whole_log(hook: JobFacts, path: str | None) -> Facts:
    if not path:
        return {}
    try:
        lines = Path(path).read_text("utf-8", errors="replace").split("\n")
    except OSError:
        return {}
    return hook.lines({}, [line.rstrip("\r") for line in lines]) or {}
