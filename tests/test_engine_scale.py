"""A pass over many jobs: the socket answers while it runs, a stop ends it between two
jobs, and a log that did not change is not read (issue 24's scale points). No timing:
each test asserts on what happened and in which order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

import sweepd.app.daemon as daemon_mod
import sweepd.core.engine as engine_mod
import sweepd.core.log_facts as log_facts_mod
import sweepd.core.planning as planning_mod
from sweepd.api.server import FRONT
from sweepd.app.daemon import serve
from sweepd.clusters.base import ClusterBackend, JobStatus, SchedulerState
from sweepd.config import Config
from sweepd.core.engine import Engine
from sweepd.monitor.facts import LineFact
from sweepd.monitor.tail import LogTailer
from sweepd.store.rows import Sweep
from sweepd.store.store import Store
from sweepd.util.clock import Clock
from tests.support.service import STEP, _config, _seed

# Checkpoints every few jobs here (100 in the daemon): the same code on fewer jobs.
YIELD_EVERY = 10


class _Running:
    """A scheduler that has every job RUNNING (only the logs matter)."""

    name = "running"
    submit_timeout_s = 0.0

    async def close(self) -> None:
        return None

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        return {b: JobStatus(SchedulerState.RUNNING) for b in backend_ids}

    async def live_tokens(self) -> dict[str, str]:
        return {}

    async def cancel(self, backend_id: str) -> None:
        raise AssertionError(f"nothing is to be cancelled here ({backend_id})")




@asynccontextmanager
async def _engine(tmp_path: Path) -> AsyncIterator[Engine]:
    config = _config(tmp_path)
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    engine = Engine(store, cast(ClusterBackend, _Running()), Clock(1.0), config)
    try:
        yield engine
    finally:
        await engine.close()
        await store.close()




async def test_a_stop_during_a_pass_ends_it_between_two_logs_and_stores_none_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_mod, "YIELD_EVERY", YIELD_EVERY)
    jobs = 3 * YIELD_EVERY
    stop = asyncio.Event()
    parsed: list[str] = []
    armed = [True]   # one stop, in the first pass
    real_parse = log_facts_mod.parse_line

    def parse(line: str) -> LineFact | None:
        if not parsed and not stop.is_set() and armed:
            # The stop arrives through the event loop, as a signal handler's does.
            asyncio.get_running_loop().call_soon(stop.set)
            armed.clear()
        parsed.append(line)
        return real_parse(line)

    monkeypatch.setattr(log_facts_mod, "parse_line", parse)
    async with _engine(tmp_path) as engine:
        paths = await _seed(engine.store, tmp_path / "logs", jobs, lines=3)
        engine.stopping = stop
        await engine.step()
        # The stop was taken at the first checkpoint after it came: the pass parsed at most
        # one checkpoint's worth of the logs, and stored nothing (no offset moved).
        assert stop.is_set()
        assert 0 < len(parsed) <= 3 * YIELD_EVERY < 3 * jobs
        assert all(j.log_offset == 0 and j.last_step is None
                   for j in await engine.store.active.jobs())
        # The next pass (no stop) reads every log from its stored offset, all of it.
        stop.clear()
        parsed.clear()
        await engine.step()
        assert len(parsed) == 3 * jobs
        stored = await engine.store.active.jobs()
        assert [j.log_offset for j in stored] == [p.stat().st_size for p in paths]
        assert {j.last_step for j in stored} == {2}


async def test_only_logs_that_changed_are_read_again(tmp_path: Path) -> None:
    async with _engine(tmp_path) as engine:
        paths = await _seed(engine.store, tmp_path / "logs", 5, lines=2)
        await engine.step()
        first = dict(engine.follower.reads)
        assert first == {j.id: 1 for j in await engine.store.active.jobs()}
        with paths[3].open("a") as f:
            f.write(STEP.format(n=2) + "\n")
        for _ in range(3):
            engine.tail_clocks.clear()   # every log due now, not after the tail interval
            await engine.step()
        changed = [j.id for j in await engine.store.active.jobs()][3]
        # One more read of the log that grew; none of the four quiet ones.
        assert engine.follower.reads == {**first, changed: 2}
        assert (await engine.store.jobs.get(changed)).last_step == 2


async def test_the_socket_answers_before_the_first_pass_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    real_make = daemon_mod.make_backend

    class Held:
        """The real backend, whose first stray check (in the first pass) waits for the
        test: the first pass is under way until the test lets it go."""

        def __init__(self, inner: ClusterBackend) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def live_tokens(self) -> dict[str, str]:
            entered.set()
            await release.wait()
            return await self._inner.live_tokens()

    def make(config: Config) -> tuple[ClusterBackend, Any]:
        inner, clock = real_make(config)
        return cast(ClusterBackend, Held(inner)), clock

    monkeypatch.setattr(daemon_mod, "make_backend", make)
    config = _config(tmp_path)
    stop, ready = asyncio.Event(), asyncio.Event()
    daemon = asyncio.create_task(serve(config, stop, ready.set, front=FRONT))
    try:
        await asyncio.wait_for(entered.wait(), 20)
        connector = aiohttp.UnixConnector(path=str(config.daemon.socket_path))
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get("http://sweepd/health") as answer:
            assert answer.status == 200
            assert (await answer.json()) == {"ok": True, "recovered": False}
        # The answer came while the first pass was still waiting on the scheduler.
        assert not ready.is_set() and not release.is_set()
        release.set()
        await asyncio.wait_for(ready.wait(), 20)
        connector = aiohttp.UnixConnector(path=str(config.daemon.socket_path))
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get("http://sweepd/health") as answer:
            assert (await answer.json()) == {"ok": True, "recovered": True}
    finally:
        release.set()
        stop.set()
        assert await asyncio.wait_for(daemon, 20) == 0


async def test_a_stop_during_the_first_pass_ends_the_daemon_without_finishing_the_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM's handler sets the stop event; here the test sets it while the daemon's
    first pass parses a backlog of many logs."""
    monkeypatch.setattr(engine_mod, "YIELD_EVERY", YIELD_EVERY)
    config = _config(tmp_path)
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    try:
        await _seed(store, tmp_path / "logs", 2 * YIELD_EVERY, lines=2)
    finally:
        await store.close()
    stop = asyncio.Event()
    parsed: list[str] = []
    real_parse = log_facts_mod.parse_line

    def parse(line: str) -> LineFact | None:
        if not parsed:   # the stop arrives through the event loop, as SIGTERM's does
            asyncio.get_running_loop().call_soon(stop.set)
        parsed.append(line)
        return real_parse(line)

    monkeypatch.setattr(log_facts_mod, "parse_line", parse)
    def make(config: Config) -> tuple[ClusterBackend, Clock]:
        return cast(ClusterBackend, _Running()), Clock(1.0)

    monkeypatch.setattr(daemon_mod, "make_backend", make)
    ready = asyncio.Event()
    assert await asyncio.wait_for(serve(config, stop, ready.set, front=FRONT), 20) == 0
    # It ended inside its first pass: not every log was parsed, none stored, never ready.
    assert 0 < len(parsed) < 2 * 2 * YIELD_EVERY
    assert not ready.is_set()
    store = await Store.open(config.daemon.db_path)
    try:
        assert all(j.log_offset == 0 for j in await store.active.jobs())
    finally:
        await store.close()


async def test_a_new_process_plans_its_sweeps_over_passes_in_order_within_a_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no budget left after the first sweep, each pass plans one sweep, the next one
    in order, and wakes the loop for the rest; every sweep is planned once."""
    planned: list[int] = []

    async def advance(engine: Engine, sweep: Sweep) -> None:
        planned.append(sweep.id)

    monkeypatch.setattr(planning_mod, "advance", advance)
    monkeypatch.setattr(engine_mod, "PLAN_BUDGET_S", 0.0)
    async with _engine(tmp_path) as engine:
        ids = [await engine.store.sweeps.create("model-perf", f"s{i}", {"kind": "model-perf"})
               for i in range(3)]
        per_pass = []
        for _ in range(4):
            planned.clear()
            await engine.step()
            per_pass.append((list(planned), engine.changed.is_set()))
        assert per_pass == [([ids[0]], True), ([ids[1]], True), ([ids[2]], False), ([], False)]


async def test_a_stop_while_the_logs_are_read_leaves_the_rest_unread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All of a pass's logs are read in one worker thread (a restart's backlog over
    thousands of logs takes seconds): a stop arriving meanwhile is asked between two logs."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    read: list[Path] = []
    real = LogTailer.read_lines_sync

    def reading(tailer: LogTailer) -> list[tuple[int, str]]:
        read.append(tailer.path)
        if len(read) == 3:   # the stop comes (on the event loop) while the third is read
            loop.call_soon_threadsafe(stop.set)
            for _ in range(500):
                if stop.is_set():
                    break
                time.sleep(0.01)
        return real(tailer)

    monkeypatch.setattr(LogTailer, "read_lines_sync", reading)
    async with _engine(tmp_path) as engine:
        await _seed(engine.store, tmp_path / "logs", 8, lines=2)
        engine.stopping = stop
        await engine.step()
        assert stop.is_set() and len(read) == 3   # the five others were not read
        assert all(j.log_offset == 0 for j in await engine.store.active.jobs())


@pytest.mark.parametrize("collecting", [True, False])
async def test_the_collector_waits_for_a_passs_log_reading_and_is_then_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collecting: bool) -> None:
    import gc

    seen: list[bool] = []
    real_parse = log_facts_mod.parse_line

    def parse(line: str) -> LineFact | None:
        seen.append(gc.isenabled())
        return real_parse(line)

    monkeypatch.setattr(log_facts_mod, "parse_line", parse)
    was = gc.isenabled()
    try:
        async with _engine(tmp_path) as engine:
            await _seed(engine.store, tmp_path / "logs", 3, lines=2)
            (gc.enable if collecting else gc.disable)()
            await engine.step()
            assert seen and not any(seen)   # no collection while the logs' facts are made
            assert gc.isenabled() == collecting
            # A pass that fails while storing leaves the collector as it was, too.
            for path in (tmp_path / "logs").iterdir():
                path.write_text(path.read_text() + STEP.format(n=9) + "\n")

            async def fail(chunks: object) -> None:
                raise RuntimeError("the store failed")

            monkeypatch.setattr(engine.store.jobs, "record_logs", fail)
            with pytest.raises(RuntimeError):
                await engine.step()
            assert gc.isenabled() == collecting
    finally:
        (gc.enable if was else gc.disable)()


async def test_a_pass_over_unchanged_logs_stats_each_once_and_reads_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: at 10,000 jobs most logs are unchanged on most passes, and one ending
    mid-line (a writer flushing in blocks) was read again on every pass. Now such a log
    costs one stat: no read, no chunk, nothing stored."""
    import os

    from sweepd.store.jobs import JobsTable

    count = 12
    async with _engine(tmp_path) as engine:
        paths = await _seed(engine.store, tmp_path / "logs", count, lines=2)
        for path in paths[::2]:   # half end mid-line
            with path.open("a") as f:
                f.write("0: completed st")
        for _ in range(2):   # read, then settled (every log due each time)
            engine.tail_clocks.clear()
            await engine.step()
        names = {str(p) for p in paths}
        calls = {"stat": 0, "pread": 0}
        written: list[int] = []
        real_stat, real_pread = os.stat, os.pread
        real_record = JobsTable.record_logs

        def stat(path: Any, *a: Any, **k: Any) -> Any:
            calls["stat"] += os.fspath(path) in names if isinstance(path, str | Path) else 0
            return real_stat(path, *a, **k)

        def pread(*a: Any) -> bytes:
            calls["pread"] += 1
            return real_pread(*a)

        async def record(table: JobsTable, chunks: Sequence[Any]) -> None:
            written.append(len(chunks))
            await real_record(table, chunks)

        monkeypatch.setattr(os, "stat", stat)
        monkeypatch.setattr(os, "pread", pread)
        monkeypatch.setattr(JobsTable, "record_logs", record)
        for _ in range(3):
            engine.tail_clocks.clear()
            await engine.step()
        monkeypatch.undo()
        assert calls == {"stat": 3 * count, "pread": 0}
        assert written == [0, 0, 0]
        # What the two first passes read is stored: every complete line, no partial one.
        stored = await engine.store.active.jobs()
        assert [j.log_offset for j in stored] == [
            p.stat().st_size - (len("0: completed st") if i % 2 == 0 else 0)
            for i, p in enumerate(paths)]
