"""Stray jobs: a job in the queue that carries a token of this store but is not the job
that token's row follows (a duplicate of a submission a crash left open, or one no row
knows). Looked for at the first poll of a process and while a reconciled submission may
still surface; each is cancelled and reported. Tokens of other stores are never touched.
What it asks of the engine (scancels after the pass's transaction, news) it returns."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import structlog

from sweepd.clusters.base import ClusterBackend
from sweepd.store.rows import Job
from sweepd.store.states import JobState
from sweepd.store.store import NotFound, Store

log = structlog.get_logger("sweepd.core.strays")

_TOKEN_SWEEP = re.compile(r"^sw(\d+)-")


@dataclass
class StrayEffects:
    """Scancels for the engine's queue (sent after the deciding transaction), and news."""

    cancel_later: list[str] = field(default_factory=list)
    notify: bool = False


@dataclass
class Strays:
    store: Store
    backend: ClusterBackend
    # Until when each poll also looks for duplicate submissions (None: at the first poll).
    until: float | None = field(default=None, init=False)
    _store_id: str | None = field(default=None, init=False)

    def watch(self, until: float) -> None:
        """Look for strays at every poll until `until` (a reconciled submission's end)."""
        self.until = max(self.until or 0.0, until)

    def due(self, now: float) -> bool:
        return self.until is None or now <= self.until

    async def store_id(self) -> str:
        """This store's identity, read once: the suffix of every token it issues."""
        if self._store_id is None:
            self._store_id = await self.store.daemon_state.store_id()
        return self._store_id

    async def check(self, now: float, effects: StrayEffects) -> None:
        """Cancel and report every stray in the queue. `effects` is the caller's, filled as
        the check goes: what was decided before a failed call still holds."""
        first = self.until is None
        if first:
            self.until = now   # the first check of this process is this one
        store_id = await self.store_id()
        live = await self.backend.live_tokens()
        rows = await self.store.jobs.by_tokens(live.values())
        for backend_id, token in sorted(live.items()):
            row = rows.get(token)
            if row is None and token.endswith(f".{store_id}"):
                effects.notify |= await self._cancel(
                    backend_id, token, None,
                    f"job {backend_id} carries token {token} of this sweepd, which has no job "
                    "with it")
            elif row is not None and row.backend_id not in (None, backend_id):
                effects.notify |= await self._cancel(
                    backend_id, token, row, f"job {backend_id} carries token {token}, whose "
                    f"job is scheduler job {row.backend_id}")
            elif first and row is not None and row.state == JobState.CANCELLED:
                # Cancelled in the store, its scancel lost with an earlier process (a crash,
                # or an outage before a `sweepd run` ended): send it again, once.
                log.warning("job.cancel_resent", backend_id=backend_id, job=row.id)
                effects.cancel_later.append(backend_id)

    async def _cancel(self, backend_id: str, token: str, row: Job | None, why: str) -> bool:
        """Cancel one stray now; True when a sweep's trail says so (news)."""
        log.warning("job.duplicate_cancelled", backend_id=backend_id, token=token, why=why)
        sweep_id = row.sweep_id if row else sweep_of_token(token)
        try:
            sweep = await self.store.sweeps.get(sweep_id) if sweep_id is not None else None
        except NotFound:
            sweep = None
        if sweep is not None:
            async with self.store.tx():
                await self.store.events.add(
                    sweep.id, "decision", f"cancel scheduler job {backend_id}: a duplicate "
                    "submission", rule="recovery.duplicate_cancelled", evidence=why,
                    job_id=row.id if row else None, run_id=row.run_id if row else None)
                await self.store.events.add(
                    sweep.id, "progress", f"sweep {sweep.id}: cancelled Slurm job {backend_id}, "
                    f"a duplicate submission ({why})")
        await self.backend.cancel(backend_id)
        return sweep is not None


def sweep_of_token(token: str) -> int | None:
    found = _TOKEN_SWEEP.match(token)
    return int(found.group(1)) if found else None
