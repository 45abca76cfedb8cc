"""What the CLI answers without a daemon: `report`, `explain` and `logs` on a state
directory (`--state-dir`), and `validate`.

The database is opened read-only (SQLite's `mode=ro`, no migration): re-reading a
`sweepd run`/`demo` result, or a stopped daemon's, can change nothing, and may run while
a daemon uses the same directory. `validate` runs the daemon's own checks on a throwaway
state directory."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from sweepd.app.queries import Queries
from sweepd.cli.client import Client, ClientError, SweepControls, SweepReads
from sweepd.config import Config
from sweepd.kinds.registry import kind_of
from sweepd.store.store import NotFound, Store

T = TypeVar("T")
DB_NAME = "sweepd.db"   # config.DaemonConfig.db_path's name


class OfflineClient(Client):
    """The read-only verbs of `Client`, answered from the state directory's database."""

    def __init__(self, state_dir: Path) -> None:  # no socket, no HTTP client
        self.state_dir = state_dir
        self.socket_path = state_dir / DB_NAME
        self.reads = OfflineSweepReads(self)
        self.controls = SweepControls(self)   # each refused by `_request`

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


class OfflineSweepReads(SweepReads):
    """The sweep reads a state directory answers; the others refused as `_request` does."""

    def __init__(self, client: OfflineClient) -> None:
        super().__init__(client)
        self._offline = client

    def report(self, sweep_id: int) -> dict[str, Any]:
        return self._offline._query(lambda q: q.report(sweep_id))

    def report_markdown(self, sweep_id: int) -> str:
        return str(self.report(sweep_id)["markdown"])

    def explain(self, sweep_id: int) -> dict[str, Any]:
        return self._offline._query(lambda q: q.explain(sweep_id))

    def page(self, sweep_id: int) -> dict[str, Any]:
        return self._offline._query(lambda q: q.page(sweep_id))

    def job_log(self, sweep_id: int, which: str | None = None, offset: int = 0
                ) -> dict[str, Any]:
        return self._offline._query(lambda q: q.job_log(sweep_id, which, offset))

    def plot(self, sweep_id: int) -> bytes | None:
        async def draw(q: Queries) -> bytes | None:
            sweep = await q.store.sweeps.get(sweep_id)
            plot = kind_of(sweep.kind).plot
            if plot is None:
                return None
            runs = await q.store.runs.of_sweep(sweep_id)
            return plot(sweep, runs, await q.store.jobs.of_sweep(sweep_id))

        return self._offline._query(draw)


def stopped_daemons_state(args: argparse.Namespace, socket: Path) -> Path | None:
    """With no daemon on `socket` (none listens there), the state directory of the config
    the verbs found, when it holds a database: a stopped daemon's sweeps are read there,
    read-only, as `--state-dir` reads them (a new user's `sweepd report 1` after `sweepd
    stop` was refused). None: a daemon answers, or there is nothing to read."""
    from sweepd.config import ConfigError, find_config, load_config

    if _listening(socket):
        return None
    path = find_config(getattr(args, "config", None))
    if path is None:
        return None
    try:
        state = load_config(path).daemon.state_dir
    except ConfigError:
        return None
    return state if (state / DB_NAME).is_file() else None


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


# -- validate, without a daemon ------------------------------------------------------------

def validate_spec(data: Any, config: Config) -> dict[str, Any]:
    """The daemon's `validate` (parse, the kind's checks, what the spec refers to, the
    pre-flight, the first plan, each first job's name), run here on a throwaway state
    directory: nothing is recorded anywhere and nothing is submitted."""
    from sweepd.app.daemon import open_parts

    scratch = Path(tempfile.mkdtemp(prefix="sweepd-validate-"))
    config = config.model_copy(update={"daemon": config.daemon.model_copy(
        update={"state_dir": scratch})})

    async def run() -> dict[str, Any]:
        async with open_parts(config) as parts:
            return await parts.service.validate(data)

    try:
        return asyncio.run(run())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
