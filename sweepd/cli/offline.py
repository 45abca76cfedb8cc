"""`report`, `explain` and `logs` on a state directory without a daemon (`--state-dir`).

The database is opened read-only (SQLite's `mode=ro`, no migration): re-reading a
`sweepd run`/`demo` result, or a stopped daemon's, can change nothing, and may run while
a daemon uses the same directory."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from sweepd.app.queries import Queries
from sweepd.cli.client import Client, ClientError
from sweepd.kinds.registry import kind_of
from sweepd.store.store import NotFound, Store

T = TypeVar("T")
DB_NAME = "sweepd.db"   # config.DaemonConfig.db_path's name


class OfflineClient(Client):
    """The read-only verbs of `Client`, answered from the state directory's database."""

    def __init__(self, state_dir: Path) -> None:  # no socket, no HTTP client
        self.state_dir = state_dir
        self.socket_path = state_dir / DB_NAME

    def close(self) -> None:
        pass

    def __enter__(self) -> OfflineClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        pass

    def _query(self, call: Callable[[Queries], Awaitable[T]]) -> T:
        async def run() -> T:
            store = await Store.open_readonly(self.socket_path)
            try:
                return await call(Queries(store))
            finally:
                await store.close()

        try:
            return asyncio.run(run())
        except NotFound as e:
            raise ClientError(404, str(e)) from None

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        raise ClientError(400, f"{method} {path} needs the daemon: only report, explain and "
                               "logs read a state directory")

    def report(self, sweep_id: int) -> dict[str, Any]:
        return self._query(lambda q: q.report(sweep_id))

    def report_markdown(self, sweep_id: int) -> str:
        return str(self.report(sweep_id)["markdown"])

    def explain(self, sweep_id: int) -> dict[str, Any]:
        return self._query(lambda q: q.explain(sweep_id))

    def job_log(self, sweep_id: int, which: str | None = None, offset: int = 0
                ) -> dict[str, Any]:
        return self._query(lambda q: q.job_log(sweep_id, which, offset))

    def plot(self, sweep_id: int) -> bytes | None:
        async def draw(q: Queries) -> bytes | None:
            sweep = await q.store.sweep(sweep_id)
            plot = kind_of(sweep.kind).plot
            if plot is None:
                return None
            return plot(sweep, await q.store.runs(sweep_id), await q.store.jobs(sweep_id))

        return self._query(draw)
