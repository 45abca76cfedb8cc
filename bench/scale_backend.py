"""The two helper processes of `bench/monitor_scale.py` (not a test, not part of the package).

    python bench/scale_backend.py daemon --config sweepd.toml
    python bench/scale_backend.py writer --logs DIR --jobs 500 --rate 20 --times OUT.json

`daemon` runs the real `sweepd serve` (`sweepd.app.daemon.run_daemon`: engine loop, API server,
signal handling) with one substitution: the cluster backend is `ScaleBackend`, which says
every job it is asked about is RUNNING. The jobs themselves are log files written by the
`writer` process, so the daemon pays for following them exactly as it would on Slurm, and
nothing of the writing is charged to it.

`writer` appends `--rate` lines/s to each of `--jobs` logs in the formats of
maxtext-slurm-facts.md §2 (`srun -l` rank prefixes), spread evenly over time, and on
SIGTERM dumps the wall time at which each rank-0 step line was written.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Runnable from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.clusters.base import (
    ClusterBackend,
    JobRequest,
    JobStatus,
    Listing,
    SchedulerState,
    Submitted,
)
from sweepd.config import Config, load_config
from sweepd.core import planning
from sweepd.core.engine import Engine
from sweepd.sim.logfmt import header_lines, memstats_lines, mfu_line, step_line
from sweepd.util.clock import Clock

BACKEND_PREFIX = "scale-"
# One cycle of four lines: two ranks print the (identical) step line, then two ranks print
# something that is not a fact. So 20 lines/s is 5 steps/s, every line still parsed.
LINES_PER_STEP = 4


def backend_id(index: int) -> str:
    return f"{BACKEND_PREFIX}{index}"


def log_name(index: int) -> str:
    return f"job-{index:04d}.log"


class ScaleBackend:
    """A scheduler that has every job RUNNING: only following the logs costs anything."""

    name: str = "scale"

    def __init__(self) -> None:
        self.polls = 0

    @property
    def submit_timeout_s(self) -> float:
        return 0.0

    async def submit(self, request: JobRequest) -> Submitted:
        raise NotImplementedError("the bench seeds its jobs; the daemon must not submit")

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        self.polls += 1
        return {b: JobStatus(SchedulerState.RUNNING) for b in backend_ids}

    async def find_by_token(self, token: str) -> Submitted | None:
        return None

    async def live_tokens(self) -> dict[str, str]:
        return {}

    async def cancel(self, backend_id: str) -> None:
        return None

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        return {n: "alloc" for n in nodes}

    async def resume_node(self, node: str) -> None:
        return None

    async def show_node(self, node: str) -> str:
        return f"NodeName={node} State=IDLE"

    def node_shell(self) -> list[str]:
        return ["true", "{node}"]

    async def end_note(self, output_dir: Path) -> str | None:
        return None

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        return None

    async def idle_nodes(self, partition: str | None) -> Listing:
        return Listing([], "scale bench: no idle nodes")

    async def others_jobs(self, partition: str | None) -> Listing:
        return Listing([], "scale bench: no other users")

    async def close(self) -> None:
        return None


@dataclass
class PassStats:
    """Where each engine pass spends its wall time, and how many worker-thread round trips
    (aiosqlite calls, executor jobs such as aiofiles' open/seek/read/close) it makes."""

    passes: list[dict[str, float]] = field(default_factory=list)
    current: dict[str, float] = field(default_factory=dict)
    started: Path | None = None   # written when the first pass starts
    profile: cProfile.Profile | None = None   # SWEEPD_BENCH_PROFILE=path: steady passes

    def add(self, key: str, value: float) -> None:
        self.current[key] = self.current.get(key, 0.0) + value

    def install(self) -> None:
        from aiosqlite.core import Connection

        stats = self
        step, advance = Engine.step, planning.advance
        collecting: dict[str, float] = {}

        def on_gc(phase: str, info: dict[str, int]) -> None:
            """The collector's wall time inside passes, by generation (gc_s, gc2_s)."""
            if phase == "start":
                collecting["at"] = time.perf_counter()
            elif "at" in collecting and "start" in stats.current:
                took = time.perf_counter() - collecting.pop("at")
                stats.add("gc_s", took)
                if info["generation"] == 2:
                    stats.add("gc2_s", took)

        gc.callbacks.append(on_gc)
        execute: Any = Connection._execute
        run_in_executor = asyncio.BaseEventLoop.run_in_executor

        async def timed_step(engine: Engine) -> None:
            stats.current = {"start": time.time()}
            if stats.started is not None and not stats.passes:
                stats.started.write_text(str(stats.current["start"]))   # the bench waits
            t = time.perf_counter()
            c = time.process_time()
            # Profile the steady passes only (from the 6th: the first ones adopt the jobs), or
            # from SWEEPD_BENCH_PROFILE_FROM (0: a restart's first pass too).
            first = int(os.environ.get("SWEEPD_BENCH_PROFILE_FROM", "5"))
            profiling = stats.profile is not None and len(stats.passes) >= first
            if profiling:
                assert stats.profile is not None
                stats.profile.enable()
            await step(engine)
            if profiling:
                assert stats.profile is not None
                stats.profile.disable()
            stats.add("wall_s", time.perf_counter() - t)
            stats.add("cpu_s", time.process_time() - c)
            stats.current["end"] = time.time()
            # Ended by the daemon's stop request (the pass did not run to its end).
            stats.current["stopped"] = float(engine.stop_requested())
            stats.passes.append(stats.current)
            if stats.started is not None and len(stats.passes) == 1:
                # The bench waits for the first pass's end before it stops the daemon.
                stats.started.with_suffix(".first").write_text(json.dumps(stats.current))

        async def timed_advance(engine: Engine, sweep: Any) -> None:
            t = time.perf_counter()
            await advance(engine, sweep)
            stats.add("advance_s", time.perf_counter() - t)
            stats.add("advanced", 1)

        async def counted_execute(conn: Connection, fn: Any, *a: Any, **k: Any) -> Any:
            stats.add("db_calls", 1)
            return await execute(conn, fn, *a, **k)

        def counted_executor(loop: Any, executor: Any, fn: Any, *a: Any) -> Any:
            stats.add("executor_calls", 1)
            return run_in_executor(loop, executor, fn, *a)

        setattr(Engine, "step", timed_step)  # noqa: B010 - a bench-only patch, on purpose
        setattr(planning, "advance", timed_advance)  # noqa: B010
        setattr(Connection, "_execute", counted_execute)  # noqa: B010
        setattr(asyncio.BaseEventLoop, "run_in_executor", counted_executor)  # noqa: B010


def run_scale_daemon(config: Config, stats_out: Path | None = None) -> int:
    import sweepd.app.daemon
    from sweepd.api.server import FRONT

    stats = PassStats()
    if stats_out is not None:
        stats.started = stats_out.with_suffix(".started")
        if os.environ.get("SWEEPD_BENCH_PROFILE"):
            stats.profile = cProfile.Profile()
        stats.install()

    def make_backend(_: Config) -> tuple[ClusterBackend, Clock]:
        return ScaleBackend(), Clock(1.0)  # real time: policy durations are wall seconds

    setattr(sweepd.app.daemon, "make_backend", make_backend)  # noqa: B010
    try:
        return sweepd.app.daemon.run_daemon(config, FRONT)
    finally:
        if stats_out is not None:
            stats_out.write_text(json.dumps(stats.passes))
        if stats.profile is not None:
            stats.profile.dump_stats(os.environ["SWEEPD_BENCH_PROFILE"])


# -- the log writer ----------------------------------------------------------------------


def _preamble(index: int) -> bytes:
    node = f"bn{index:04d}"
    lines = [*header_lines(str(90000 + index), f"bench-{index}", "llama2-70b", [node], []),
             "== Preflight BEGIN (timeout=900s) ==", "== Preflight END (3s) ==",
             "0: " + mfu_line("MI300X", 1307),
             *("0: " + line for line in memstats_lines(41.2, 178.5))]
    return ("\n".join(lines) + "\n").encode()


def _line(k: int) -> tuple[int | None, bytes]:
    """The k-th training line of a job: (step if it is the rank-0 step line, bytes)."""
    step, which = divmod(k, LINES_PER_STEP)
    if which < 2:
        body = step_line(step, 0.2, 301.566, 23.07, 1989.82, 31457280, 9.0 - step * 1e-4)
        return (step if which == 0 else None), f"{which}: {body}\n".encode()
    return None, (f"{which - 2}: I1129 checkpoint_manager.py:512] no checkpoint at step "
                  f"{step}, next at {step + 100}\n").encode()


def write_logs(logs: Path, jobs: int, rate: float, times_out: Path,
               seconds: float | None = None) -> None:
    """Until SIGTERM (or `seconds`): line k of job j at start + (k + j/jobs) / rate. Then dump
    write times."""
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    logs.mkdir(parents=True, exist_ok=True)
    fds = [os.open(logs / log_name(j), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
           for j in range(jobs)]
    for j, fd in enumerate(fds):
        os.write(fd, _preamble(j))
    written: list[list[float]] = [[] for _ in range(jobs)]  # [job][step] = wall time
    period = 1.0 / rate
    start = time.time()
    k = 0
    late = 0.0  # worst lag behind schedule, to show the writer kept up
    while not stop:
        if seconds is not None and time.time() - start >= seconds:
            break
        _, data = _line(k)
        step = k // LINES_PER_STEP if k % LINES_PER_STEP == 0 else None
        for j, fd in enumerate(fds):
            due = start + (k + j / jobs) * period
            now = time.time()
            if due - now > 0.002:  # sleep only when it is worth it: 10k lines/s
                time.sleep(due - now)
            else:
                late = max(late, now - due)
            os.write(fd, data)
            if step is not None:
                written[j].append(time.time())
            if stop:
                break
        k += 1
    for fd in fds:
        os.close(fd)
    times_out.write_text(json.dumps({"start": start, "lines_per_job": k, "max_late_s": late,
                                     "written": written}))


def smoke() -> int:
    """Seconds: the backend has every method of the protocol, and a second of writing leaves
    logs whose rank-0 step lines the daemon's parser reads as steps."""
    from sweepd.monitor.facts import StepFact
    from sweepd.monitor.parse import parse_line

    wanted = {n for n in vars(ClusterBackend) if not n.startswith("_")}
    missing = sorted(n for n in wanted | set(ClusterBackend.__annotations__)
                     if not hasattr(ScaleBackend(), n))
    if missing:
        print(f"ScaleBackend lacks {', '.join(missing)} of ClusterBackend", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="sweepd-scale-smoke-") as tmp:
        times = Path(tmp) / "written.json"
        write_logs(Path(tmp) / "logs", 3, 20.0, times, seconds=1.0)
        written = json.loads(times.read_text())["written"]
        text = (Path(tmp) / "logs" / log_name(0)).read_text()
    steps = [line for line in text.splitlines() if line.startswith("0: ")
             and isinstance(parse_line(line.removeprefix("0: ")), StepFact)]
    print(f"smoke: {sum(map(len, written))} step lines written to 3 logs, job 0's log parses "
          f"to {len(steps)} steps")
    return 0 if written[0] and len(steps) == len(written[0]) else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true",
                   help="check the backend against the protocol and write logs for a second")
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("daemon")
    d.add_argument("--config", type=Path, required=True)
    d.add_argument("--stats", type=Path, help="write per-pass timings here at exit")
    w = sub.add_parser("writer")
    w.add_argument("--logs", type=Path, required=True)
    w.add_argument("--jobs", type=int, default=500)
    w.add_argument("--rate", type=float, default=20.0)
    w.add_argument("--times", type=Path, required=True)
    args = p.parse_args(argv)
    if args.smoke:
        return smoke()
    if args.cmd is None:
        p.error("a command is required: daemon or writer")
    if args.cmd == "daemon":
        return run_scale_daemon(load_config(args.config), args.stats)
    write_logs(args.logs, args.jobs, args.rate, args.times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
