"""`sweepd run` and `sweepd demo`: one sweep in the foreground, without a daemon."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

from sweepd.app.daemon import Parts, first_of, open_parts
from sweepd.app.startup import check_cluster, check_state_dir
from sweepd.clusters.base import ControllerUnreachable
from sweepd.config import Config
from sweepd.core.control import abort
from sweepd.store.states import JOB_ACTIVE, SweepState
from sweepd.store.store import InvalidTransition

# Documented exit codes of `sweepd run`, `sweepd demo` and `sweepd watch`.
EXIT_VERDICT = 0
EXIT_BAD_INPUT = 2
EXIT_AWAITING_DECISION = 3
EXIT_FAILED = 4
EXIT_INTERRUPTED = 130   # Ctrl-C: the sweep's jobs were cancelled (or could not be)

Emit = Callable[[str], None]
INTERRUPTED = "interrupted (Ctrl-C on `sweepd run`): running jobs cancelled"

EXIT_FOR_STATE = {SweepState.DONE: EXIT_VERDICT, SweepState.AWAITING_DECISION:
                  EXIT_AWAITING_DECISION, SweepState.FAILED: EXIT_FAILED,
                  SweepState.ABORTED: EXIT_FAILED}


async def run_sweep(config: Config, spec: dict[str, Any], emit: Emit,
                    resume_id: int | None = None, kept: bool = True) -> int:
    """Submit `spec` (or pick up sweep `resume_id`) and drive it until it ends or stops.
    Ctrl-C cancels the sweep's jobs (no daemon follows them after we leave); a second
    Ctrl-C leaves at once, naming the jobs that may still run. `kept` False: the state
    directory is removed when the caller is done (a demo's own): no hint to read it again."""
    check_state_dir(config)   # one line, not a traceback from deep in opening the store
    for note in await check_cluster(config):   # Slurm's commands, slurm.conf, the repo
        emit(f"note: {note}; waiting for it")
    async with open_parts(config) as parts:
        service = parts.service
        sweep_id = resume_id or int((await service.submit(spec))["id"])
        emit(f"sweep {sweep_id} submitted; state in {config.daemon.state_dir}")
        running: list[str] = []   # the scheduler ids of its active jobs, as last seen
        with _interrupts(emit, sweep_id, running) as interrupted:
            state = await _drive(parts, config, sweep_id, emit, interrupted, running)
            if state is None:
                return await _cancel_interrupted(parts, sweep_id, emit)
        report = await service.report(sweep_id)
        emit("")
        emit(str(report["markdown"]))
        # No daemon knows this sweep: say how to read it again, without one.
        if kept:
            emit(f"(sweep {sweep_id} is in {config.daemon.state_dir}: read it again with "
                 f"`sweepd report|explain|logs {sweep_id} --state-dir "
                 f"{config.daemon.state_dir}`)")
        else:
            emit("(this demo's state directory is removed when it ends: give --state-dir "
                 "DIR to keep it and read the sweep again with `sweepd report|explain|logs "
                 f"{sweep_id} --state-dir DIR`)")
        return EXIT_FOR_STATE[state]


async def _active_jobs(parts: Parts, sweep_id: int) -> list[str]:
    return [j.backend_id for j in await parts.store.jobs.of_sweep(sweep_id)
            if j.state in JOB_ACTIVE and j.backend_id]


async def _drive(parts: Parts, config: Config, sweep_id: int, emit: Emit,
                 interrupted: asyncio.Event, running: list[str]) -> SweepState | None:
    """Engine passes until the sweep ends or stops (its state), or Ctrl-C (None). A pass
    under way is finished first: a submission is recorded whole."""
    engine, seen = parts.engine, 0
    while not interrupted.is_set():
        await engine.step()
        for event in await parts.store.events.of_sweep(sweep_id, seen, kind="progress"):
            emit(event.reason)
            seen = event.id
        state = (await parts.store.sweeps.get(sweep_id)).state
        if state in EXIT_FOR_STATE:
            return state
        running[:] = await _active_jobs(parts, sweep_id)
        await first_of(config.daemon.tick_s, engine.changed, engine.news(), interrupted)
    return None


@contextlib.contextmanager
def _interrupts(emit: Emit, sweep_id: int, running: list[str]) -> Iterator[asyncio.Event]:
    """SIGINT sets the returned event; the second one leaves at once."""
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        if interrupted.is_set():
            left = " ".join(running)
            emit(f"interrupted again: left at once; sweep {sweep_id}'s jobs may still run"
                 + (f" (cancel them with `scancel {left}`)" if left else ""))
            os._exit(EXIT_INTERRUPTED)
            return
        interrupted.set()
        emit(f"interrupted: cancelling sweep {sweep_id}'s running jobs "
             "(Ctrl-C again to leave at once)")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (RuntimeError, ValueError):   # not the main thread: Ctrl-C is not ours to take
        yield interrupted
        return
    try:
        yield interrupted
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _cancel_interrupted(parts: Parts, sweep_id: int, emit: Emit) -> int:
    """Cancel the sweep and its jobs, recorded as a person's abort: nobody follows them
    once `sweepd run` has left."""
    jobs = await _active_jobs(parts, sweep_id)
    try:
        await abort(parts.engine, sweep_id, INTERRUPTED)
    except InvalidTransition:
        emit(f"sweep {sweep_id} had already ended")
        return EXIT_INTERRUPTED
    except (ControllerUnreachable, RuntimeError, OSError) as e:
        emit(f"sweep {sweep_id} is aborted, but its jobs could not be cancelled ({e}): "
             f"cancel them with `scancel {' '.join(jobs)}`")
        return EXIT_INTERRUPTED
    emit(f"sweep {sweep_id} aborted; " + (f"job(s) {', '.join(jobs)} cancelled" if jobs
                                          else "no job was running"))
    return EXIT_INTERRUPTED
