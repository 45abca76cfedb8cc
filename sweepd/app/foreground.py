"""`sweepd run` and `sweepd demo`: one sweep in the foreground, without a daemon."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
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
EXIT_INTERRUPTED = 130   # Ctrl-C: the sweep's jobs were cancelled (or could not be);
# SIGTERM 143, SIGHUP 129 (128 + the signal, as a shell reports a process it ended)

Emit = Callable[[str], None]
# Told the sweep's progress (`app/progress.sweep_progress`) after each engine pass: the
# terminal bar of `sweepd run` (cli/progress_bar.py).
OnProgress = Callable[[dict[str, Any]], None]
INTERRUPTED = "interrupted (Ctrl-C on `sweepd run`): running jobs cancelled"
# How each signal that ends `sweepd run` is named in the abort's reason (the person's word:
# Ctrl-C, a `kill`, the terminal closed) and in the line said on stderr.
STOPPED_BY = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM",
              signal.SIGHUP: "SIGHUP, its terminal closed"}


def _stderr(line: str) -> None:
    """A line on stderr, where a closed terminal (SIGHUP) may have taken it: never raises."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


class Interrupt(asyncio.Event):
    """Set by the first signal that ends `sweepd run`; `signum` says which."""

    signum: signal.Signals = signal.SIGINT

    @property
    def reason(self) -> str:
        if self.signum == signal.SIGINT:
            return INTERRUPTED
        return (f"stopped ({STOPPED_BY[self.signum]}: {self.signum.name} to `sweepd run`): "
                "running jobs cancelled")

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)

EXIT_FOR_STATE = {SweepState.DONE: EXIT_VERDICT, SweepState.AWAITING_DECISION:
                  EXIT_AWAITING_DECISION, SweepState.FAILED: EXIT_FAILED,
                  SweepState.ABORTED: EXIT_FAILED}


async def run_sweep(config: Config, spec: dict[str, Any], emit: Emit,
                    resume_id: int | None = None, kept: bool = True,
                    tell: Emit = _stderr, on_progress: OnProgress | None = None) -> int:
    """Submit `spec` (or pick up sweep `resume_id`) and drive it until it ends or stops.
    Ctrl-C, SIGTERM or SIGHUP cancels the sweep's jobs, recorded as the person's abort (no
    daemon follows them after we leave); a second signal leaves at once, naming the jobs
    that may still run. An error while driving the sweep cancels them too. Each of these
    ends with one line on stderr (`tell`) naming the jobs and what was done. `kept` False:
    the state directory is removed when the caller is done (a demo's own): no hint to read
    it again. `on_progress` (the terminal bar) is told where the sweep is after each pass."""
    check_state_dir(config)   # one line, not a traceback from deep in opening the store
    for note in await check_cluster(config):   # Slurm's commands, slurm.conf, the repo
        emit(f"note: {note}; waiting for it")
    async with open_parts(config) as parts:
        service = parts.service
        sweep_id = resume_id or int((await service.submit(spec))["id"])
        emit(f"sweep {sweep_id} submitted; state in {config.daemon.state_dir}")
        running: list[str] = []   # the scheduler ids of its active jobs, as last seen
        hint = _cancel_hint(config)
        with _interrupts(emit, sweep_id, running, tell, hint) as interrupted:
            try:
                state = await _drive(parts, config, sweep_id, emit, interrupted, running,
                                     on_progress)
            except Exception as e:
                # No daemon follows the jobs once we leave: cancel them, then the error.
                why = f"`sweepd run` failed ({type(e).__name__}: {e})"
                await _cancel_interrupted(parts, sweep_id, tell, why,
                                          f"{why}: running jobs cancelled", hint)
                raise
            if state is None:
                name = STOPPED_BY[interrupted.signum].split(",")[0]
                await _cancel_interrupted(parts, sweep_id, tell, name, interrupted.reason,
                                          hint)
                return interrupted.exit_code
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


def _cancel_hint(config: Config) -> Callable[[list[str]], str]:
    """The command that cancels jobs `run` leaves behind, on its backend."""
    if config.cluster.backend == "local":
        from sweepd.clusters.local.records import kill_command

        jobs_dir = config.daemon.state_dir / "local" / "jobs"
        return lambda ids: kill_command(jobs_dir, ids)
    return lambda ids: f"scancel {' '.join(ids)}"


async def _active_jobs(parts: Parts, sweep_id: int) -> list[str]:
    return [j.backend_id for j in await parts.store.jobs.of_sweep(sweep_id)
            if j.state in JOB_ACTIVE and j.backend_id]


async def _drive(parts: Parts, config: Config, sweep_id: int, emit: Emit,
                 interrupted: asyncio.Event, running: list[str],
                 on_progress: OnProgress | None = None) -> SweepState | None:
    """Engine passes until the sweep ends or stops (its state), or Ctrl-C (None). A pass
    under way is finished first: a submission is recorded whole."""
    engine, seen = parts.engine, 0
    while not interrupted.is_set():
        await engine.step()
        for event in await parts.store.events.of_sweep(sweep_id, seen, kind="progress"):
            if interrupted.is_set():   # a SIGHUP may have taken the terminal: the abort first
                with contextlib.suppress(OSError, ValueError):
                    emit(event.reason)
            else:
                emit(event.reason)
            seen = event.id
        if on_progress is not None and not interrupted.is_set():
            on_progress((await parts.service.summary(sweep_id))["progress"])
        state = (await parts.store.sweeps.get(sweep_id)).state
        if state in EXIT_FOR_STATE:
            return state
        running[:] = await _active_jobs(parts, sweep_id)
        await first_of(config.daemon.tick_s, engine.changed, engine.news(), interrupted)
    return None


@contextlib.contextmanager
def _interrupts(emit: Emit, sweep_id: int, running: list[str], tell: Emit = _stderr,
                cancel_hint: Callable[[list[str]], str] = lambda ids: f"scancel {' '.join(ids)}"
                ) -> Iterator[Interrupt]:
    """SIGINT, SIGTERM or SIGHUP sets the returned event; a second one leaves at once. A
    SIGHUP ignored when `run` started (`nohup`) stays ignored."""
    interrupted = Interrupt()
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        if interrupted.is_set():
            left = " ".join(running)
            tell(f"sweepd run: {signum.name} again: left at once; sweep {sweep_id}'s jobs "
                 "may still run" + (f" (cancel them with `{cancel_hint(running)}`)"
                                    if left else ""))
            os._exit(interrupted.exit_code)
            return
        interrupted.signum = signum
        interrupted.set()
        again = "Ctrl-C" if signum == signal.SIGINT else signum.name
        with contextlib.suppress(OSError, ValueError):   # a closed terminal (SIGHUP)
            emit(f"interrupted{'' if signum == signal.SIGINT else f' ({signum.name})'}: "
                 f"cancelling sweep {sweep_id}'s running jobs ({again} again to leave "
                 "at once)")

    taken: list[signal.Signals] = []
    for signum in STOPPED_BY:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
            continue   # nohup: the person asked that a closed terminal not stop it
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (RuntimeError, ValueError):   # not the main thread: not ours to take
            break
        taken.append(signum)
    try:
        yield interrupted
    finally:
        for signum in taken:
            loop.remove_signal_handler(signum)


async def _cancel_interrupted(parts: Parts, sweep_id: int, tell: Emit, how: str, reason: str,
                              cancel_hint: Callable[[list[str]], str]) -> None:
    """Cancel the sweep and its jobs, recorded as a person's abort (`reason`): nobody
    follows them once `sweepd run` has left. One line on stderr says what was done."""
    jobs = await _active_jobs(parts, sweep_id)
    named = f"job(s) {', '.join(jobs)}" if jobs else "no job was running"
    try:
        await abort(parts.engine, sweep_id, reason)
    except InvalidTransition:
        tell(f"sweepd run: {how}: sweep {sweep_id} had already ended; nothing cancelled")
        return
    except (ControllerUnreachable, RuntimeError, OSError) as e:
        tell(f"sweepd run: {how}: sweep {sweep_id} is aborted, but {named} could not be "
             f"cancelled ({e}): cancel them with `{cancel_hint(jobs)}`")
        return
    tell(f"sweepd run: {how}: sweep {sweep_id} aborted; "
         + (f"{named} cancelled" if jobs else named))
