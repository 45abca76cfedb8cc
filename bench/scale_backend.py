"""The two helper processes of `bench/monitor_scale.py` (not a test, not part of the package).

    python bench/scale_backend.py daemon --config sweepd.toml
    python bench/scale_backend.py writer --logs DIR --jobs 500 --rate 20 --times OUT.json

`daemon` runs the real `sweepd serve` (`sweepd.daemon.run_daemon`: engine loop, API server,
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
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Runnable from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.clock import Clock
from sweepd.clusters.base import ClusterBackend, JobRequest, JobStatus, SchedulerState, Submitted
from sweepd.config import Config, load_config
from sweepd.engine import Engine, _TailClock
from sweepd.follow import LogFollower
from sweepd.jobs import conclude
from sweepd.monitor.tail import LogTailer
from sweepd.sim.logfmt import header_lines, memstats_lines, mfu_line, step_line
from sweepd.states import JobState, SweepState
from sweepd.store.rows import Job
from sweepd.store.store import Store

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

    async def submit(self, request: JobRequest) -> Submitted:
        raise NotImplementedError("the bench seeds its jobs; the daemon must not submit")

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        self.polls += 1
        return {b: JobStatus(SchedulerState.RUNNING) for b in backend_ids}

    async def find_by_token(self, token: str) -> Submitted | None:
        return None

    async def cancel(self, backend_id: str) -> None:
        return None

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        return {n: "alloc" for n in nodes}

    async def resume_node(self, node: str) -> None:
        return None

    async def close(self) -> None:
        return None


async def _record_log_batched(
    self: Store, job_id: int, fields: Mapping[str, Any], steps: Sequence[Mapping[str, Any]],
    signals: Sequence[Mapping[str, Any]],
) -> None:
    """PROPOSED `Store.record_log`: the same rows in the same transaction, but one
    `executemany` per table instead of one `execute` (one worker-thread round trip) per row."""
    async with self.tx() as conn:
        if steps:
            await conn.executemany(
                "INSERT OR REPLACE INTO steps (job_id, step, seconds, tflops, mfu, tgs, loss)"
                " VALUES (?,?,?,?,?,?,?)",
                [(job_id, s["step"], s.get("seconds"), s.get("tflops"), s.get("mfu"), s["tgs"],
                  s.get("loss")) for s in steps])
        if signals:
            await conn.executemany(
                "INSERT OR IGNORE INTO signals (job_id, offset, rank, node, klass, detail, line)"
                " VALUES (?,?,?,?,?,?,?)",
                [(job_id, g["offset"], g.get("rank"), g.get("node"), g["klass"], g.get("detail"),
                  g["line"]) for g in signals])
        if fields:
            sets = ", ".join(f"{k} = ?" for k in fields)
            await conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*fields.values(), job_id))


async def _record_logs(
    self: Store, chunks: Sequence[tuple[int, Mapping[str, Any], Sequence[Mapping[str, Any]],
                                        Sequence[Mapping[str, Any]]]],
) -> None:
    """PROPOSED `Store.record_logs`: every job's chunk of one pass in one transaction (each
    job's facts still commit with its offset), one `executemany` per table and per set of
    job columns."""
    if not chunks:
        return
    updates: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for job_id, fields, _, _ in chunks:
        if fields:
            updates.setdefault(tuple(fields), []).append((*fields.values(), job_id))
    async with self.tx() as conn:
        await conn.executemany(
            "INSERT OR REPLACE INTO steps (job_id, step, seconds, tflops, mfu, tgs, loss)"
            " VALUES (?,?,?,?,?,?,?)",
            [(job_id, s["step"], s.get("seconds"), s.get("tflops"), s.get("mfu"), s["tgs"],
              s.get("loss")) for job_id, _, steps, _ in chunks for s in steps])
        await conn.executemany(
            "INSERT OR IGNORE INTO signals (job_id, offset, rank, node, klass, detail, line)"
            " VALUES (?,?,?,?,?,?,?)",
            [(job_id, g["offset"], g.get("rank"), g.get("node"), g["klass"], g.get("detail"),
              g["line"]) for job_id, _, _, signals in chunks for g in signals])
        for keys, rows in updates.items():
            sets = ", ".join(f"{k} = ?" for k in keys)
            await conn.executemany(f"UPDATE jobs SET {sets} WHERE id = ?", rows)


Chunk = tuple[int, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]


async def _read_chunk(self: LogFollower, job: Job) -> Chunk | None:
    """PROPOSED `LogFollower.read_chunk`: `read` without the store write; None: nothing new."""
    if not job.log_path:
        return None
    tailer = self._tailers.get(job.id)
    if tailer is None:
        tailer = LogTailer(Path(job.log_path), offset=job.log_offset, identity=job.log_identity)
        self._tailers[job.id] = tailer
    lines = await tailer.read_lines()
    if not lines:
        if tailer.identity != job.log_identity or tailer.offset != job.log_offset:
            return job.id, {"log_offset": tailer.offset, "log_identity": tailer.identity}, [], []
        return None
    chunk = self._facts(job, lines)
    chunk.fields.update(log_offset=tailer.offset, log_identity=tailer.identity,
                        last_output_at=self._clock.now())
    return job.id, chunk.fields, chunk.steps, chunk.signals


async def _step_batched(self: Engine) -> None:
    """PROPOSED `Engine.step`: read every due log concurrently, store all chunks in one
    transaction, then re-read the active jobs in one query (instead of one `store.job` per
    job) and run the unchanged per-job state logic (`_judge`, the rest of `_follow`)."""
    for sweep in await self.store.sweeps([SweepState.QUEUED]):
        await self.store.transition_sweep(sweep.id, SweepState.RUNNING, "sweep started",
                                          rule="engine.start")
    jobs = [j for j in await self.store.active_jobs() if j.state != JobState.SUBMITTING]
    statuses = await self._poll(jobs)
    if statuses is None:
        return
    now = self.clock.now()
    due = []
    for job in jobs:
        tail = self._tail.setdefault(job.id, _TailClock())
        status = statuses.get(job.backend_id or "")
        if now >= tail.next_at or (status is not None and status.state.finished):
            due.append(job)
    chunks = await asyncio.gather(*(_read_chunk(self.follower, j) for j in due))
    await _record_logs(self.store, [c for c in chunks if c is not None])
    base = self.config.policy.poll_interval_s / 60
    fresh_any = False
    for job, chunk in zip(due, chunks, strict=True):
        tail = self._tail[job.id]
        fresh = chunk is not None and bool(chunk[1].get("last_output_at"))
        tail.interval = base if fresh else min(max(tail.interval * 2, base),
                                               self.config.policy.tail_backoff_max_s)
        tail.next_at = now + tail.interval
        fresh_any |= fresh
    if fresh_any:
        self.notify()
    current = {j.id: j for j in await self.store.active_jobs()}
    for job in jobs:
        latest = current.get(job.id) or await self.store.job(job.id)
        await _judge(self, latest, statuses.get(job.backend_id or ""), now)
    for sweep in await self.store.sweeps([SweepState.RUNNING]):
        await self._advance(sweep)


async def _judge(self: Engine, job: Job, status: JobStatus | None, now: float) -> None:
    """`Engine._follow` after its `store.job` re-read, unchanged."""
    if status is None:
        return await self._check_hang(job, now)
    if status.state != job.scheduler_state:
        await self.store.update_job(job.id, scheduler_state=str(status.state))
    if status.state == SchedulerState.RUNNING and job.state == JobState.QUEUED:
        await self.store.transition_job(job.id, JobState.RUNNING, "scheduler says RUNNING",
                                        rule="scheduler.running",
                                        last_output_at=job.last_output_at or now)
        return None
    if status.state.finished:
        self._tail.pop(job.id, None)
        self.follower.forget(job.id)
        await conclude(self, await self.store.job(job.id), status)
        self.notify()
        return None
    return await self._check_hang(job, now)


async def _read_lines_one_hop(self: LogTailer) -> list[tuple[int, str]]:
    """PROPOSED `LogTailer.read_lines`: the same open/fstat/seek/read, but as one blocking
    function in one worker-thread hop (aiofiles makes four: open, seek, read, close)."""
    self.last_read_bytes = 0
    self.has_more = False
    got = await asyncio.to_thread(_read_sync, self)
    if got is None:
        return []
    data, size = got
    self.last_read_bytes = len(data)
    lines = self._split(data)
    self.has_more = len(data) == self.chunk_bytes and size > self.offset
    return lines


def _read_sync(self: LogTailer) -> tuple[bytes, int] | None:
    try:
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            self._check_identity(f"{st.st_dev}:{st.st_ino}", st.st_size)
            if st.st_size <= self.offset:
                return None
            f.seek(self.offset)
            return f.read(self.chunk_bytes), st.st_size
    except FileNotFoundError:
        return None


async def _advance_nothing(self: Engine, sweep: Any) -> None:
    """UPPER BOUND, not a proposal: no `_advance` at all. Here every sweep's plan is `[]`
    (all runs in flight), so this shows what advancing only sweeps with news would save."""


# Proposed package changes, measured by `monitor_scale.py --experiment NAME` before anyone
# applies them. Each replaces one package function in the daemon process only.
EXPERIMENTS: dict[str, tuple[type, str, Any]] = {
    "executemany": (Store, "record_log", _record_log_batched),
    "batched": (Engine, "step", _step_batched),
    "onehop": (LogTailer, "read_lines", _read_lines_one_hop),
    "noadvance": (Engine, "_advance", _advance_nothing),
}


@dataclass
class PassStats:
    """Where each engine pass spends its wall time, and how many worker-thread round trips
    (aiosqlite calls, executor jobs such as aiofiles' open/seek/read/close) it makes."""

    passes: list[dict[str, float]] = field(default_factory=list)
    current: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.current[key] = self.current.get(key, 0.0) + value

    def install(self) -> None:
        from aiosqlite.core import Connection

        stats = self
        step, advance = Engine.step, Engine._advance
        execute: Any = Connection._execute
        run_in_executor = asyncio.BaseEventLoop.run_in_executor

        async def timed_step(engine: Engine) -> None:
            stats.current = {}
            t = time.perf_counter()
            c = time.process_time()
            await step(engine)
            stats.add("wall_s", time.perf_counter() - t)
            stats.add("cpu_s", time.process_time() - c)
            stats.current["end"] = time.time()
            stats.passes.append(stats.current)

        async def timed_advance(engine: Engine, sweep: Any) -> None:
            t = time.perf_counter()
            await advance(engine, sweep)
            stats.add("advance_s", time.perf_counter() - t)

        async def counted_execute(conn: Connection, fn: Any, *a: Any, **k: Any) -> Any:
            stats.add("db_calls", 1)
            return await execute(conn, fn, *a, **k)

        def counted_executor(loop: Any, executor: Any, fn: Any, *a: Any) -> Any:
            stats.add("executor_calls", 1)
            return run_in_executor(loop, executor, fn, *a)

        setattr(Engine, "step", timed_step)  # noqa: B010 - a bench-only patch, on purpose
        setattr(Engine, "_advance", timed_advance)  # noqa: B010
        setattr(Connection, "_execute", counted_execute)  # noqa: B010
        setattr(asyncio.BaseEventLoop, "run_in_executor", counted_executor)  # noqa: B010


def run_scale_daemon(config: Config, experiments: Sequence[str] = (),
                     stats_out: Path | None = None) -> int:
    import sweepd.daemon

    for name in experiments:
        owner, attr, replacement = EXPERIMENTS[name]
        setattr(owner, attr, replacement)
    stats = PassStats()
    if stats_out is not None:
        stats.install()

    def make_backend(_: Config) -> tuple[ClusterBackend, Clock]:
        return ScaleBackend(), Clock(1.0)  # real time: policy durations are wall seconds

    setattr(sweepd.daemon, "make_backend", make_backend)  # noqa: B010
    try:
        return sweepd.daemon.run_daemon(config)
    finally:
        if stats_out is not None:
            stats_out.write_text(json.dumps(stats.passes))


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


def write_logs(logs: Path, jobs: int, rate: float, times_out: Path) -> None:
    """Until SIGTERM: line k of job j at start + (k + j/jobs) / rate. Then dump write times."""
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("daemon")
    d.add_argument("--config", type=Path, required=True)
    d.add_argument("--stats", type=Path, help="write per-pass timings here at exit")
    d.add_argument("--experiment", action="append", default=[], choices=sorted(EXPERIMENTS))
    w = sub.add_parser("writer")
    w.add_argument("--logs", type=Path, required=True)
    w.add_argument("--jobs", type=int, default=500)
    w.add_argument("--rate", type=float, default=20.0)
    w.add_argument("--times", type=Path, required=True)
    args = p.parse_args(argv)
    if args.cmd == "daemon":
        return run_scale_daemon(load_config(args.config), args.experiment, args.stats)
    write_logs(args.logs, args.jobs, args.rate, args.times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
