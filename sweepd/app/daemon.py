"""Lifecycle: open and migrate the store, recover, run the engine and the API, stop.

Signal handlers only set the stop event; a second signal exits at once. The engine loop
and the API server are supervised: if one dies, the daemon logs it and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp.web import AppRunner

from sweepd.app.service import Service
from sweepd.app.startup import check_start
from sweepd.clusters.factory import make_backend
from sweepd.config import Config, ConfigError
from sweepd.core.engine import Engine
from sweepd.core.kind_facts import backfill
from sweepd.core.metrics import ENGINE_PASS, TimedBackend
from sweepd.notify import build_workers
from sweepd.store.store import Store
from sweepd.util.sdnotify import SdNotify

log = structlog.get_logger("sweepd.app.daemon")


class AnotherSweepd(RuntimeError):
    """Another sweepd (daemon or `sweepd run`) holds this state directory or socket."""


@dataclass(frozen=True)
class Front:
    """What the daemon serves its service through: `api/server.py`'s `FRONT`, handed in by
    the caller (the CLI), so that the API imports the daemon's service and never the other
    way round. `refuse_if_served(socket)` raises `AnotherSweepd` where a daemon already
    listens; `start(service, socket, max_body_bytes, socket_group)` and
    `start_metrics(service, "host:port")` return the runner the daemon cleans up;
    `start_web(service, config)` the dashboard's (`sweepd/web/`), where `[web] listen` is
    set."""

    refuse_if_served: Callable[[Path], None]
    start: Callable[[Service, Path, int, str | None], Awaitable[AppRunner]]
    start_metrics: Callable[[Service, str], Awaitable[AppRunner]]
    start_web: Callable[[Service, Config], Awaitable[AppRunner]] | None = None


@dataclass
class Parts:
    store: Store
    engine: Engine
    service: Service


@contextlib.contextmanager
def state_dir_lock(state_dir: Path) -> Iterator[None]:
    """One process per state directory: two engines on one store would both act on the
    same sweeps. The lock dies with its process, so a killed daemon never leaves it held."""
    path = state_dir / "sweepd.lock"
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AnotherSweepd(f"another sweepd uses {state_dir} ({path} is locked)") from None
        yield


@contextlib.contextmanager
def _new_state_dir(state_dir: Path) -> Iterator[None]:
    """Create the state directory if it is missing, and remove it again when opening
    fails (a bad scenario, another sweepd): a refused start leaves nothing behind. One that
    existed before is never removed."""
    created = not state_dir.exists()
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        if created:
            shutil.rmtree(state_dir, ignore_errors=True)
        raise


@contextlib.asynccontextmanager
async def open_parts(config: Config) -> AsyncIterator[Parts]:
    async with contextlib.AsyncExitStack() as opened:   # closed in reverse order
        with _new_state_dir(config.daemon.state_dir):
            opened.enter_context(state_dir_lock(config.daemon.state_dir))
            # The backend first: a bad scenario or cluster setting fails before the store
            # opens.
            inner, clock = make_backend(config)
            backend = TimedBackend(inner)   # each scheduler call timed for /metrics
            opened.push_async_callback(backend.close)
            store = await Store.open(config.daemon.db_path)
            opened.push_async_callback(store.close)
            await backfill(store)   # kind facts of jobs ended before they were kept
        engine = Engine(store, backend, clock, config)
        opened.push_async_callback(engine.close)
        yield Parts(store, engine, Service(engine))


async def engine_loop(engine: Engine, stop: asyncio.Event, tick_s: float,
                      beat: Callable[[], object] | None = None) -> None:
    """Passes until stopped. Idle: one cheap pass per tick. After a change (a submit, a
    resume, a finished job: `engine.changed`): at once. `beat` (the systemd watchdog) is
    called per pass: a stuck loop stops the pings."""
    while not stop.is_set():
        with ENGINE_PASS.time():
            await engine.step()
        if beat:
            beat()
        await first_of(tick_s, engine.changed, stop)


async def first_of(timeout_s: float, *events: asyncio.Event) -> None:
    """Until one of the events is set, or the timeout."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def _beats(*calls: Callable[[], object]) -> Callable[[], None]:
    def beat() -> None:
        for call in calls:
            call()

    return beat


async def serve(config: Config, stop: asyncio.Event,
                ready: Callable[[], None] | None = None, *, front: Front) -> int:
    # Config and environment first (commands, slurm.conf, repo, token): a refused start
    # writes nothing.
    for note in await check_start(config):
        log.warning("daemon.controller_away", note=note)
    front.refuse_if_served(config.daemon.socket_path)   # before a state directory is made
    state_dir = config.daemon.state_dir
    created = not state_dir.exists()
    started = asyncio.Event()
    try:
        return await _serve(config, stop, ready, started, front)
    except BaseException:
        # A start refused after the state directory was made (a port taken, recovery
        # failed) leaves none behind; once the daemon served, its state is kept.
        if created and not started.is_set():
            shutil.rmtree(state_dir, ignore_errors=True)
        raise


async def _serve(config: Config, stop: asyncio.Event, ready: Callable[[], None] | None,
                 started: asyncio.Event, front: Front) -> int:
    sd = SdNotify()
    async with open_parts(config) as parts:
        # Before recovery: a bad token or token file refuses the start (SecretError).
        workers = build_workers(config.telegram, parts.store, parts.service, parts.engine.news)
        parts.service.allowed_chats = frozenset(workers.chat_ids)   # what a spec may name
        # The engine takes the daemon's stop request between two jobs or sweeps of a pass.
        parts.engine.stopping = stop
        # The metrics port before the socket: a start refused for its port never listened
        # on the socket (a client seeing it listen may take the daemon for started).
        listeners: list[AppRunner] = []   # /metrics and the dashboard on TCP, where set
        runner: AppRunner | None = None
        try:
            for start in (_metrics_listener, _web_listener):
                started_one = await start(front, parts.service, config)
                if started_one is not None:
                    listeners.append(started_one)
            runner = await front.start(parts.service, config.daemon.socket_path,
                                       config.daemon.max_body_bytes, config.daemon.socket_group)
            # Recovery is the engine's first pass: adopt or resubmit write-ahead jobs,
            # re-tail running ones from their stored offsets. The socket answers during it
            # (a pass gives the loop a turn between jobs): with thousands of jobs it is long.
            await parts.engine.step()
        except BaseException:
            if runner is not None:
                await runner.cleanup()
            await _cleanup(listeners)
            await workers.close()
            raise
        if stop.is_set():   # stopped during recovery: never ready, nothing more to run
            await runner.cleanup()
            await _cleanup(listeners)
            await workers.close()
            log.info("daemon.stopped", during="recovery")
            return 0
        started.set()
        parts.service.health.recovered = True
        log.info("daemon.ready", socket=str(config.daemon.socket_path),
                 db=str(config.daemon.db_path), backend=config.cluster.backend)
        if ready:
            ready()
        sd.ready()
        tasks = {
            asyncio.create_task(engine_loop(parts.engine, stop, config.daemon.tick_s,
                                            _beats(sd.beat, parts.service.health.engine_pass)),
                                name="engine"),
            asyncio.create_task(stop.wait(), name="stop"),
            *(asyncio.create_task(run(stop), name=name) for name, run in workers.runners),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.get_name() != "stop" and task.exception() is not None:
                    log.error("daemon.task_died", task=task.get_name(),
                              error=repr(task.exception()))
                    return 1
            return 0
        finally:
            sd.stopping()
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if runner is not None:
                await runner.cleanup()
            await _cleanup(listeners)
            await workers.close()
            log.info("daemon.stopped")


async def _metrics_listener(front: Front, service: Service,
                            config: Config) -> AppRunner | None:
    """The optional TCP listener for /metrics."""
    listen = config.metrics.listen
    return None if listen is None else await _listen(
        "metrics", listen, front.start_metrics(service, listen))


async def _web_listener(front: Front, service: Service, config: Config) -> AppRunner | None:
    """The optional dashboard (`[web] listen`). The log names the address, never the token."""
    listen = config.web.listen
    if listen is None or front.start_web is None:
        return None
    return await _listen("web", listen, front.start_web(service, config))


async def _listen(section: str, listen: str, starting: Awaitable[AppRunner]) -> AppRunner:
    """A TCP listener started; an address it cannot bind refuses the start in one line."""
    try:
        runner = await starting
    except (OSError, ValueError) as e:
        raise ConfigError(f"{section}.listen = {listen!r}: cannot listen there: "
                          f"{getattr(e, 'strerror', None) or e}") from None
    log.info(f"daemon.{section}", listen=listen)
    return runner


async def _cleanup(runners: list[AppRunner]) -> None:
    for runner in reversed(runners):
        await runner.cleanup()


def run_daemon(config: Config, front: Front) -> int:
    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                log.warning("daemon.exit_now")
                os._exit(130)
            log.info("daemon.stopping")
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        return await serve(config, stop, front=front)

    return asyncio.run(main())
