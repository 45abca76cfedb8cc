"""What one engine pass costs at scale, in one process (a benchmark, not a test).

    python bench/pass_cost.py WORK [--passes 10] [--grow 1.0] [--profile out.prof] [--parts]
    python bench/pass_cost.py WORK --steady 0.25 [--passes 20] [--grow 0.45]
    python bench/pass_cost.py --smoke

WORK is a directory `bench/monitor_scale.py --keep WORK` left (its store, its logs): the
store is copied, the logs are appended to in place. Before each pass a `--grow` fraction of
the logs get one line of the writer's cycle (as the bench's writer does between two passes);
then one `Engine.step()` runs, timed (CPU of the whole process, wall). The writing is not
timed. No daemon, no socket, no other process: a figure that load moves less than the
daemon's, for comparing two versions of the pass back to back. `--smoke` seeds 200 jobs of
its own, times 3 passes, and fails when an idle pass makes more than `IDLE_CALLS_PER_JOB`
Python calls per job, or when the logs a pass looks at are not those the tail cadence says
(`_cadence`: counted on a clock moved by hand), or when a new line makes more than
`LINE_CALLS`. `--steady` keeps the logs' tail clocks and
spaces the passes as the daemon's loop does: the cost of a pass as the daemon reads its logs.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scale_backend import (  # this script's directory
    LINES_PER_STEP,
    ScaleBackend,
    _line,
    _preamble,
    log_name,
)

from sweepd.config import Config, DaemonConfig
from sweepd.core.engine import Engine
from sweepd.store.active import ActiveJobs
from sweepd.store.jobs import JobsTable
from sweepd.store.store import Store
from sweepd.util.clock import Clock

SMOKE_JOBS = 200
# The smoke's bound on an idle pass's main-thread calls per job (200 jobs, the pass's own
# calls included): 4.8 measured (5.7 before the follower looked its tailers up inline, 8.8
# before the judge loop and the poll skipped unchanged jobs inline: docs/benchmarks.md);
# either cost fails it, as would one and a quarter more calls per job.
IDLE_CALLS_PER_JOB = 6.0
# The smoke's bound on the main-thread Python calls a new line costs (passes where every log
# grew one line, over the writer's cycle of four: a rank-0 step line, rank 1's, two lines
# that say nothing; `--parts`' wrappers included): at 10,000 jobs at 1 line/s the lines are
# nearly all of the daemon's CPU (docs/benchmarks.md). 15.1 measured (21.9 before the line
# path was cut); counted work, not time: one call more per line fails it.
LINE_CALLS = 16.0


class Parts:
    """Main-thread CPU (ms) spent in a few of the pass's parts, summed over the timed passes
    (a patch of the modules' names, this process only). The worker threads' share (file
    reads, SQLite) is the whole process's CPU minus the main thread's."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self.on = False

    def wrap(self, owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)
        parts = self

        if inspect.iscoroutinefunction(inner):
            async def timed_async(*a: Any, **k: Any) -> Any:
                t = time.thread_time()
                try:
                    return await inner(*a, **k)
                finally:
                    parts.add(label, time.thread_time() - t)
            setattr(owner, name, timed_async)
        else:
            def timed(*a: Any, **k: Any) -> Any:
                t = time.thread_time()
                try:
                    return inner(*a, **k)
                finally:
                    parts.add(label, time.thread_time() - t)
            setattr(owner, name, timed)

    def add(self, label: str, s: float) -> None:
        if self.on:
            self.ms[label] = self.ms.get(label, 0.0) + s * 1000

    def install(self) -> None:
        from sweepd.core import engine, follow, logpass

        self.wrap(ActiveJobs, "jobs", "active_jobs")
        self.wrap(engine, "poll", "poll")
        self.wrap(engine, "read_logs", "read_logs (all of the log part)")
        self.wrap(follow, "_read_all", "  _read_all (reading thread)")
        self.wrap(follow.LogFollower, "read_chunks", "  read_chunks (chunks, parse)")
        self.wrap(follow, "facts_of", "    facts_of (parse)")
        self.wrap(JobsTable, "record_logs", "  record_logs (main thread)")
        self.wrap(logpass, "observe_stored", "  observe_stored")
        self.wrap(engine, "judge", "judge (every call)")
        self.wrap(follow.LogFollower, "retain", "retain")


def _grow(logs: Path, jobs: int, k: int, first: int = 0, total: int | None = None) -> None:
    """Line k of the writer's cycle appended to `jobs` logs from the `first` on (wrapping
    round `total`), each opened and closed: the engine keeps every log open, and the two
    together pass the fd limit."""
    _, data = _line(k)
    for i in range(first, first + jobs):
        fd = os.open(logs / log_name(i % total if total else i), os.O_WRONLY | os.O_APPEND)
        os.write(fd, data)
        os.close(fd)


class ManualClock(Clock):
    """Cluster time that moves only when told: the tail cadence without the machine's pace."""

    def __init__(self) -> None:
        super().__init__()
        self.t = time.time()

    def now(self) -> float:
        return self.t


async def _engine(work: Path, tmp: Path, clock: Clock) -> tuple[Store, Engine, int]:
    """An engine on a copy of WORK's store, past its first passes (adopt, read the
    backlog, plan every sweep); the number of logs."""
    for name in ("sweepd.db", "sweepd.db-wal", "sweepd.db-shm"):
        if (work / "state" / name).exists():
            shutil.copy(work / "state" / name, tmp / name)
    store = await Store.open(tmp / "sweepd.db")
    config = Config(daemon=DaemonConfig(state_dir=tmp, socket=tmp / "s.sock"))
    engine = Engine(store, ScaleBackend(), clock, config)
    await engine.step()
    while engine.changed.is_set():
        await engine.step()
    return store, engine, len(list((work / "logs").iterdir()))


async def measure(work: Path, passes: int, grow: float, profile: Path | None,
                  parts: Parts | None, idle_calls_most: float | None = None) -> bool:
    """True when every timed pass read every log that grew (and only those), and, given
    `idle_calls_most`, an idle pass made at most that many calls per job."""
    tmp = Path(tempfile.mkdtemp(prefix="sweepd-pass-cost-"))
    try:
        store, engine, jobs = await _engine(work, tmp, Clock(1.0))
        # CPU time of this thread, not wall: a profile that the machine's load does not move.
        prof = cProfile.Profile(time.thread_time) if profile else None
        if parts:
            parts.on = True
        main_cpu = 0.0
        main: list[float] = []
        cpu: list[float] = []
        wall: list[float] = []
        complete = True
        for k in range(passes):
            step = int(jobs * grow)
            _grow(work / "logs", step, 1000 + k)
            # Every log due, as in the bench's steady state (the warm-up passes found no
            # new lines and backed the logs off).
            engine.tail_clocks.clear()
            reads = sum(engine.follower.reads.values())
            c, t, m = time.process_time(), time.perf_counter(), time.thread_time()
            if prof:
                prof.enable()
            await engine.step()
            if prof:
                prof.disable()
            cpu.append(time.process_time() - c)
            main.append(time.thread_time() - m)
            main_cpu += main[-1]
            wall.append(time.perf_counter() - t)
            reads = sum(engine.follower.reads.values()) - reads
            complete = complete and reads == step
            print(f"pass {k}: {cpu[-1] * 1000:.0f} ms CPU, {wall[-1] * 1000:.0f} ms wall, "
                  f"{step} logs grew, {reads} read", flush=True)
        print(f"least: {min(cpu) * 1000:.0f} ms CPU; "
              f"median: {statistics.median(cpu) * 1000:.0f} ms CPU, "
              f"{statistics.median(wall) * 1000:.0f} ms wall per pass "
              f"(load {os.getloadavg()[0]:.2f})")
        if grow:
            # Each log that grew got one line: a pass's CPU over its lines, the per-job walk
            # (due, judge, poll) included, as the daemon pays it at one line a log a pass.
            lines = int(jobs * grow)
            print(f"a line: {statistics.median(cpu) / lines * 1e6:.1f} us CPU, "
                  f"{statistics.median(main) / lines * 1e6:.1f} us of it the main thread's "
                  f"(medians over the passes)")
        if parts:
            n = len(cpu)
            print(f"per pass: process {sum(cpu) / n * 1000:.0f} ms CPU, main thread "
                  f"{main_cpu / n * 1000:.0f} ms")
            for label, ms in parts.ms.items():
                print(f"  {label:<36} {ms / n:7.1f} ms")
        if prof and profile:
            prof.dump_stats(profile)
        if idle_calls_most is not None:
            complete = complete and await _idle_calls(engine, jobs, idle_calls_most)
            complete = await _line_calls(engine, work / "logs", jobs, LINE_CALLS) and complete
        await engine.close()
        await store.close()
        return complete
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def steady(work: Path, passes: int, grow: float, tick: float,
                 parts: Parts | None = None, profile: Path | None = None) -> bool:
    """The daemon's cadence: passes `tick` apart (as its loop sleeps between them), each
    log's tail clock kept; before each, `grow` of the logs (the next ones round) get a line.
    What a pass costs with the logs read as the daemon reads them (the timed passes read
    every log), and how many logs each looks at. True when every line written was read."""
    tmp = Path(tempfile.mkdtemp(prefix="sweepd-pass-cost-"))
    try:
        store, engine, jobs = await _engine(work, tmp, Clock(1.0))
        follower = engine.follower
        step, first, warm = int(jobs * grow), 0, 5
        # CPU time of this thread, not wall: a profile that the machine's load does not move.
        prof = cProfile.Profile(time.thread_time) if profile else None
        cpu: list[float] = []
        looks = 0
        reads = sum(follower.reads.values())
        for k in range(warm + passes):
            _grow(work / "logs", step, 2000 + k, first, jobs)
            first += step
            await asyncio.sleep(tick)
            if k == warm:
                looks, reads = follower.looks, sum(follower.reads.values())
                if parts:
                    parts.on = True
            c = time.process_time()
            if prof and k >= warm:
                prof.enable()
            await engine.step()
            if prof:
                prof.disable()
            if k >= warm:
                cpu.append(time.process_time() - c)
        await asyncio.sleep(engine.config.policy.tail_interval_s)
        await engine.step()   # every line written is read by now (the clock reads the rest)
        looks = follower.looks - looks
        reads = sum(follower.reads.values()) - reads
        print(f"steady, {tick:g} s between passes, {step} of {jobs} logs grew before each: "
              f"median {statistics.median(cpu) * 1000:.0f} ms CPU a pass, "
              f"{looks / passes:,.0f} logs looked at a pass ({looks / passes / jobs:.2f} a log), "
              f"{reads / passes:,.0f} read (load {os.getloadavg()[0]:.2f}); "
              f"{statistics.median(cpu) / step * 1e6 if step else 0:.1f} us CPU a line written")
        if parts:
            for label, ms in parts.ms.items():
                print(f"  {label:<36} {ms / passes:7.1f} ms")
        if prof and profile:
            prof.dump_stats(profile)
        await engine.close()
        await store.close()
        return reads == step * passes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _cadence(work: Path) -> bool:
    """Counted, on a clock moved by hand (a 0.5 s tail interval): a pass 0.1 s after every
    log was read, with a fifth of them written to since, looks at that fifth (their writes
    were heard: read at the next pass, not half a second later); a pass 0.4 s after, nothing
    written, looks at none (a log whose writes are heard is not read ahead of its clock,
    where before every log was read at every pass); at 0.55 s the clock looks at the rest
    (the stat path stays, for what inotify does not hear)."""
    tmp = Path(tempfile.mkdtemp(prefix="sweepd-pass-cost-"))
    try:
        clock = ManualClock()
        store, engine, jobs = await _engine(work, tmp, clock)
        follower, logs, fifth = engine.follower, work / "logs", jobs // 5
        _grow(logs, jobs, 3000)   # every log written to since it was opened: heard
        looked: list[int] = []
        for gap, written in ((1.0, 0), (0.1, fifth), (0.3, 0), (0.15, 0)):
            _grow(logs, written, 3001)
            clock.t += gap
            before = follower.looks
            await engine.step()
            looked.append(follower.looks - before)
        want = [jobs, fifth, 0, jobs - fifth]
        print(f"cadence: logs looked at by a pass that reads them all, and passes 0.1, 0.4, "
              f"0.55 s after it: {looked} (want {want})")
        await engine.close()
        await store.close()
        return looked == want
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _idle_calls(engine: Engine, jobs: int, most: float) -> bool:
    """Python calls on the main thread in a pass where no log grew and every log is due (a
    `stat` each): counted work, not time, so that a test can bound it. What the pass
    spends per job that did not change is the cost at 10,000 jobs (docs/benchmarks.md):
    a call added per job and pass shows here as one more per job."""
    engine.tail_clocks.clear()
    await engine.step()   # the logs' last lines settled: the counted pass finds nothing
    engine.tail_clocks.clear()
    calls = await _counted_step(engine)
    per_job = calls / jobs
    print(f"idle pass: {calls:,} Python calls on the main thread, {per_job:.1f} per job "
          f"(at most {most:g})")
    return per_job <= most


async def _counted_step(engine: Engine) -> int:
    """One engine pass, and the Python calls it made on the main thread (sys.setprofile)."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        await engine.step()
    finally:
        sys.setprofile(None)
    return calls


async def _line_calls(engine: Engine, logs: Path, jobs: int, most: float) -> bool:
    """Python calls on the main thread per new line: four passes, every log grown by the
    next line of the writer's cycle before each (every log due). What a pass spends per line
    is the daemon's cost at 10,000 jobs at 1 line/s; this counts it, so a test can bound it."""
    calls = 0
    for k in range(LINES_PER_STEP):
        _grow(logs, jobs, 4000 + k)
        engine.tail_clocks.clear()
        calls += await _counted_step(engine)
    per_line = calls / (jobs * LINES_PER_STEP)
    print(f"lines: {calls:,} Python calls on the main thread for {jobs * LINES_PER_STEP:,} "
          f"lines, {per_line:.1f} per line (at most {most:g})")
    return per_line <= most


def _smoke_work(work: Path, jobs: int) -> None:
    """What `monitor_scale.py --keep` leaves, small: a seeded store and the jobs' logs."""
    from monitor_scale import seed

    (work / "state").mkdir(parents=True)
    (work / "logs").mkdir()
    for j in range(jobs):
        (work / "logs" / log_name(j)).write_bytes(_preamble(j))
    asyncio.run(seed(work / "state" / "sweepd.db", work / "logs", jobs))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("work", type=Path, nargs="?")
    p.add_argument("--smoke", action="store_true",
                   help="200 jobs of its own, 3 passes, an idle pass's calls bounded")
    p.add_argument("--passes", type=int, default=10)
    p.add_argument("--grow", type=float, default=1.0, help="fraction of logs grown per pass")
    p.add_argument("--profile", type=Path, help="cProfile the timed passes into this file")
    p.add_argument("--steady", type=float, metavar="TICK_S",
                   help="passes TICK_S apart, the logs' tail clocks kept (the daemon's "
                        "cadence; default: every log due at every timed pass)")
    p.add_argument("--parts", action="store_true",
                   help="main-thread CPU of the pass's parts (patches a few functions)")
    args = p.parse_args()
    parts = Parts() if args.parts or args.smoke else None
    if parts:
        parts.install()
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="sweepd-pass-cost-smoke-") as tmp:
            _smoke_work(Path(tmp), SMOKE_JOBS)
            ok = asyncio.run(measure(Path(tmp), 3, args.grow, None, parts, IDLE_CALLS_PER_JOB))
            return 0 if ok and asyncio.run(_cadence(Path(tmp))) else 1
    if args.work is None:
        p.error("WORK (a monitor_scale.py --keep directory) is required")
    if args.steady is not None:
        return 0 if asyncio.run(steady(args.work, args.passes, args.grow, args.steady, parts,
                                       args.profile)) else 1
    return 0 if asyncio.run(measure(args.work, args.passes, args.grow, args.profile,
                                    parts)) else 1


if __name__ == "__main__":
    sys.exit(main())
