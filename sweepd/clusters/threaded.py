"""The job half of the backend protocol for a backend whose work is blocking file and
process calls on this host (the simulated cluster, the local backend): each async call runs
its blocking twin in a thread, so the daemon's loop never waits on a lock or a fork."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sweepd.clusters.base import JobRequest, JobStatus, Submitted


class ThreadedJobs:
    """`submit`, `poll`, `find_by_token`, `live_tokens` and `cancel`, each the blocking
    method of the same name with a leading underscore, run off the loop."""

    async def submit(self, request: JobRequest) -> Submitted:
        return await asyncio.to_thread(self._submit, request)

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        return await asyncio.to_thread(self._poll, list(backend_ids))

    async def find_by_token(self, token: str) -> Submitted | None:
        return await asyncio.to_thread(self._find_by_token, token)

    async def live_tokens(self) -> dict[str, str]:
        return await asyncio.to_thread(self._live_tokens)

    async def cancel(self, backend_id: str) -> None:
        await asyncio.to_thread(self._cancel, backend_id)

    def _submit(self, request: JobRequest) -> Submitted:
        raise NotImplementedError

    def _poll(self, ids: list[str]) -> dict[str, JobStatus]:
        raise NotImplementedError

    def _find_by_token(self, token: str) -> Submitted | None:
        raise NotImplementedError

    def _live_tokens(self) -> dict[str, str]:
        raise NotImplementedError

    def _cancel(self, job_id: str) -> None:
        raise NotImplementedError
