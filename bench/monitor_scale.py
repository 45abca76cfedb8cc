"""How well the daemon follows many running jobs at once (a benchmark, not a test).

    python bench/monitor_scale.py [--jobs 500] [--rate 20] [--warmup 15] [--seconds 60]
                                  [--tick-s 0.25] [--poll-interval-s 60] [--keep DIR]
                                  [--restart] [--smoke]

`--restart` measures a restart on a store of `--jobs` running jobs instead (see `restart`);
`--smoke` is a few seconds on 20 jobs and exits 1 unless every step line was stored.

Three processes: the real daemon (`bench/scale_backend.py daemon`: `sweepd serve` with a
backend that reports every job RUNNING), one log writer (`--rate` lines/s into each of
`--jobs` logs, maxtext-slurm-facts.md §2 formats, 5 rank-0 step lines/s at 20 lines/s), and
this process, which seeds the store through the Store API before the daemon starts and then
polls the SQLite file read-only every 20 ms for new `steps` rows.

Latency of a step = (first time this process sees its row) - (wall time the writer finished
writing its line), for step lines written inside the measured window; it includes up to
~20 ms of this process's own polling. CPU and peak RSS are the daemon's, from /proc (all its
threads: aiosqlite's and aiofiles' worker threads included). The machine may be shared:
the load average and the other two processes' CPU are printed alongside.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scale_backend import backend_id, log_name  # this script's directory is on sys.path

from sweepd.config import DaemonConfig
from sweepd.store.rows import RunParams
from sweepd.store.states import JobState, RunState
from sweepd.store.store import Store

HERE = Path(__file__).resolve().parent
RUNS_PER_SWEEP = 10  # model-perf sweeps with every run in flight: the strategy waits
TICKS = os.sysconf("SC_CLK_TCK")


async def seed(db: Path, logs: Path, jobs: int, per_sweep: int = RUNS_PER_SWEEP) -> None:
    store = await Store.open(db)
    try:
        for first in range(0, jobs, per_sweep):
            count = min(per_sweep, jobs - first)
            nodes = f"bn[{first:04d}-{first + count - 1:04d}]"
            sweep = await store.sweeps.create("model-perf", f"scale-{first}", {
                "kind": "model-perf", "model": "llama2-70b", "nodes": nodes, "values": [1, 2]})
            for j in range(first, first + count):
                run = await store.runs.add(sweep, f"per_device_batch_size={j}",
                                               RunParams(overrides={"per_device_batch_size": j}),
                                               f"bn{j:04d}", "seeded")
                await store.runs.transition(run.id, RunState.ACTIVE, "seeded")
                job = await store.jobs.create(run, f"scale{j}", f"bench-{j}", f"bn{j:04d}")
                await store.jobs.transition(job.id, JobState.QUEUED, "seeded",
                                                backend_id=backend_id(j),
                                                log_path=str(logs / log_name(j)),
                                                submitted_at=time.time())
    finally:
        await store.close()


def cpu_s(pid: int) -> float:
    """utime + stime of a whole process (all threads), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


@dataclass
class Seen:
    """First sighting of each (job id, step) row, from a read-only connection."""

    conn: sqlite3.Connection
    last_rowid: int = 0

    def __post_init__(self) -> None:
        self.at: dict[tuple[int, int], float] = {}

    def poll(self) -> int:
        rows = self.conn.execute("SELECT rowid, job_id, step FROM steps WHERE rowid > ? "
                                 "ORDER BY rowid", (self.last_rowid,)).fetchall()
        now = time.time()
        for rowid, job_id, step in rows:
            self.at.setdefault((job_id, step), now)
            self.last_rowid = rowid
        return len(rows)

    def count(self, sql: str) -> int:
        return int(self.conn.execute(sql).fetchone()[0])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Window:
    """What was measured over the window [t0, t1]."""

    t0: float
    t1: float
    daemon_cpu_s: float
    writer_cpu_s: float
    own_cpu_s: float
    rss_peak_kb: int
    rss_now_kb: int
    threads: int
    load_before: float
    load_end: float


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--runs-per-sweep", type=int, default=RUNS_PER_SWEEP,
                   help="jobs per seeded model-perf sweep (a new daemon plans each sweep "
                        "once; the 'planning' line says whether that fell in the window)")
    p.add_argument("--rate", type=float, default=20.0, help="lines/s per job")
    p.add_argument("--warmup", type=float, default=15.0)
    p.add_argument("--seconds", type=float, default=60.0, help="measured window")
    p.add_argument("--tick-s", type=float, default=DaemonConfig().tick_s,
                   help="daemon.tick_s (default: the daemon's, 0.25)")
    p.add_argument("--poll-interval-s", type=float, default=60.0,
                   help="policy.poll_interval_s (scheduler polls)")
    p.add_argument("--tail-interval-s", type=float, default=0.5,
                   help="policy.tail_interval_s (log reads while output flows)")
    p.add_argument("--keep", type=Path, help="work in this directory and keep it")
    p.add_argument("--profile", type=Path,
                   help="py-spy record the daemon (wall time, all threads): .svg or .txt")
    p.add_argument("--restart", action="store_true",
                   help="measure a restart instead: socket answering, first full pass, "
                        "and a SIGTERM during that pass (the writer keeps writing)")
    p.add_argument("--smoke", action="store_true",
                   help="a few seconds on 20 jobs: fails unless every step line is stored "
                        "(with --restart: unless both restarts come up and stop)")
    args = p.parse_args()
    if args.smoke:
        args.jobs, args.rate, args.warmup, args.seconds = 20, 8.0, 1.0, 2.0
    return args


def _config(work: Path, args: argparse.Namespace) -> Path:
    config = work / "sweepd.toml"
    config.write_text(f'[daemon]\nstate_dir = "{work / "state"}"\n'
                      f'socket = "{work / "sweepd.sock"}"\ntick_s = {args.tick_s}\n\n'
                      f"[policy]\npoll_interval_s = {args.poll_interval_s}\n"
                      f"tail_interval_s = {args.tail_interval_s}\n")
    return config


def _wait(seen: Seen, until: float, daemon: subprocess.Popen[bytes], log: Path,
          until_rows: int | None = None) -> None:
    while time.time() < until:
        seen.poll()
        if until_rows is not None and len(seen.at) >= until_rows:
            break
        time.sleep(0.02)
    if daemon.poll() is not None:
        raise SystemExit(f"daemon exited: {log.read_text()[-2000:]}")


def _adopted(seen: Seen, jobs: int, daemon: subprocess.Popen[bytes], log: Path) -> dict[int, int]:
    """Wait until the engine has every job RUNNING; job id -> writer index."""
    deadline = time.time() + 120
    while time.time() < deadline:
        if daemon.poll() is not None:
            raise SystemExit(f"daemon exited: {log.read_text()[-2000:]}")
        if seen.count("SELECT count(*) FROM jobs WHERE state = 'running'") == jobs:
            break
        time.sleep(0.2)
    return {job_id: int(bid.removeprefix("scale-"))
            for job_id, bid in seen.conn.execute("SELECT id, backend_id FROM jobs")}


def run(args: argparse.Namespace, work: Path) -> tuple[Seen, dict[int, int], Window]:
    """Start writer and daemon, measure one window, stop both."""
    logs, state, log = work / "logs", work / "state", work / "daemon.log"
    state.mkdir(parents=True, exist_ok=True)
    config = _config(work, args)
    db = state / "sweepd.db"
    asyncio.run(seed(db, logs, args.jobs, args.runs_per_sweep))
    me = [sys.executable, str(HERE / "scale_backend.py")]
    load_before = os.getloadavg()[0]
    writer = subprocess.Popen([*me, "writer", "--logs", str(logs), "--jobs", str(args.jobs),
                               "--rate", str(args.rate), "--times", str(work / "written.json")])
    with log.open("wb") as out:
        daemon = subprocess.Popen([*me, "daemon", "--config", str(config),
                                   "--stats", str(work / "passes.json")],
                                  stdout=out, stderr=subprocess.STDOUT)
    spy: subprocess.Popen[bytes] | None = None
    try:
        seen = Seen(sqlite3.connect(f"file:{db}?mode=ro", uri=True))
        job_index = _adopted(seen, args.jobs, daemon, log)
        _wait(seen, time.time() + args.warmup, daemon, log)
        if args.profile:
            fmt = "raw" if args.profile.suffix == ".txt" else "flamegraph"
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(daemon.pid), "--idle",
                                    "--threads", "--duration", str(int(args.seconds)),
                                    "--format", fmt, "-o", str(args.profile)])
        t0, cpu0, wcpu0, own0 = (time.time(), cpu_s(daemon.pid), cpu_s(writer.pid),
                                 time.process_time())
        _wait(seen, t0 + args.seconds, daemon, log)
        window = Window(t0, time.time(), cpu_s(daemon.pid) - cpu0, cpu_s(writer.pid) - wcpu0,
                        time.process_time() - own0, status_kb(daemon.pid, "VmHWM"),
                        status_kb(daemon.pid, "VmRSS"), status_kb(daemon.pid, "Threads"),
                        load_before, os.getloadavg()[0])
        writer.send_signal(signal.SIGTERM)
        writer.wait(30)
        # What was written before t1 gets stored (up to 5 s; done when every step is in).
        steps = sum(map(len, json.loads((work / "written.json").read_text())["written"]))
        _wait(seen, time.time() + 5, daemon, log, until_rows=steps)
    finally:
        if spy is not None:
            spy.wait(120)
        if writer.poll() is None:
            writer.kill()
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)
    return seen, job_index, window


def _passes(work: Path, w: Window) -> str:
    passes = [p for p in json.loads((work / "passes.json").read_text())
              if w.t0 <= p["end"] <= w.t1]
    if not passes:
        return "-"

    def mean(key: str) -> float:
        return statistics.fmean(p.get(key, 0.0) for p in passes)

    return (f"{len(passes)} passes, mean {mean('wall_s'):.2f} s wall (of which advance "
            f"{mean('advance_s'):.2f} s), {mean('cpu_s'):.2f} s CPU, "
            f"{mean('db_calls'):,.0f} aiosqlite calls + {mean('executor_calls'):,.0f} "
            f"executor calls each; the collector {mean('gc_s') * 1000:.0f} ms a pass "
            f"(full collections {mean('gc2_s') * 1000:.0f} ms; between passes included)")


def _planning(work: Path, w: Window) -> str:
    """The daemon's planning over the whole run (a new process plans every running sweep
    once, `PLAN_BUDGET_S` of it a pass): how much, and whether any of it fell in the window,
    where its CPU counts in the figures."""
    passes = json.loads((work / "passes.json").read_text())
    planned = [p for p in passes if p.get("advanced")]
    if not planned:
        return "-"
    inside = [p for p in planned if w.t0 <= p["end"] <= w.t1]
    return (f"{sum(p['advanced'] for p in planned):,.0f} plans over {len(planned)} passes, "
            f"{sum(p.get('advance_s', 0.0) for p in planned):.2f} s advancing; the last ended "
            f"{planned[-1]['end'] - w.t0:+.1f} s from the window's start "
            f"({sum(p['advanced'] for p in inside):,.0f} plans in the window)")


def report(args: argparse.Namespace, work: Path, seen: Seen, job_index: dict[int, int],
           w: Window) -> bool:
    written = json.loads((work / "written.json").read_text())
    lat: list[float] = []
    rows: list[tuple[int, int, float, float | None]] = []   # job, step, written, seen
    missing = 0
    for job_id, j in job_index.items():
        for step, at in enumerate(written["written"][j]):
            if w.t0 <= at < w.t1:
                got = seen.at.get((job_id, step))
                rows.append((job_id, step, at, got))
                if got is None:
                    missing += 1
                else:
                    lat.append(got - at)
    # Every measured step line's times, to see which lines waited (and when).
    (work / "latencies.json").write_text(json.dumps(rows))
    span = w.t1 - w.t0
    busy = w.daemon_cpu_s / span
    p99 = pct(lat, 0.99) if lat else float("inf")
    tail = args.tail_interval_s
    table = [
        ("jobs x lines/s", f"{args.jobs} x {args.rate:g} = {args.jobs * args.rate:,.0f} lines/s"),
        ("config", f"tick_s={args.tick_s:g}, poll_interval_s={args.poll_interval_s:g} "
                   f"(tail every {tail:g} s)"),
        ("window", f"{span:.1f} s after {args.warmup:g} s warm-up"),
        ("step rows measured", f"{len(lat):,} (not stored within 5 s: {missing})"),
        ("latency p50", f"{pct(lat, 0.5):.3f} s" if lat else "-"),
        ("latency p99", f"{p99:.3f} s"),
        ("latency max", f"{max(lat):.3f} s" if lat else "-"),
        ("daemon CPU", f"{busy:.0%} of one core"),
        ("daemon peak RSS", f"{w.rss_peak_kb / 1024:.0f} MB (now {w.rss_now_kb / 1024:.0f} MB, "
                            f"{w.threads} threads)"),
        ("engine passes", _passes(work, w)),
        ("planning", _planning(work, w)),
        ("writer CPU", f"{w.writer_cpu_s / span:.0%} (max lag {written['max_late_s']:.3f} s)"),
        ("bench poller CPU", f"{w.own_cpu_s / span:.0%}"),
        ("load average (1 min)", f"before {w.load_before:.2f}, end of window {w.load_end:.2f} "
                                 f"({os.cpu_count()} cores)"),
    ]
    width = max(len(k) for k, _ in table)
    for key, value in table:
        print(f"{key:<{width}}  {value}")
    ok = p99 < 1.0 and busy < 0.50 and w.rss_peak_kb < 300 * 1024
    print(f"targets (p99 < 1 s, CPU < 50%, RSS < 300 MB): {'met' if ok else 'MISSED'}")
    print(f"work dir: {work}")
    return bool(lat) and missing == 0


def _start_daemon(work: Path, config: Path, stats: str) -> subprocess.Popen[bytes]:
    with (work / "daemon.log").open("ab") as out:
        return subprocess.Popen([sys.executable, str(HERE / "scale_backend.py"), "daemon",
                                 "--config", str(config), "--stats", str(work / stats)],
                                stdout=out, stderr=subprocess.STDOUT)


def _answers(sock: Path) -> bool:
    """The daemon's socket takes a connection and answers GET /health."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(0.5)
        try:
            c.connect(str(sock))
            c.sendall(b"GET /health HTTP/1.0\r\nHost: sweepd\r\n\r\n")
            return c.recv(12).startswith(b"HTTP/1.")
        except OSError:
            return False


def restart(args: argparse.Namespace, work: Path) -> bool:
    """Seed, let a first daemon adopt every job (all RUNNING), stop it; then (1) start a
    second daemon on that store and time its socket's first answer and its first pass's end
    (the pass timings it writes at exit), (2) start a third and SIGTERM it 0.5 s in (inside
    its first pass at scale) and time its exit."""
    logs, state = work / "logs", work / "state"
    state.mkdir(parents=True, exist_ok=True)
    config, db, sock = _config(work, args), state / "sweepd.db", work / "sweepd.sock"
    asyncio.run(seed(db, logs, args.jobs, args.runs_per_sweep))
    writer = subprocess.Popen([sys.executable, str(HERE / "scale_backend.py"), "writer",
                               "--logs", str(logs), "--jobs", str(args.jobs), "--rate",
                               str(args.rate), "--times", str(work / "written.json")])
    rows: list[tuple[str, str]] = []
    try:
        first = _start_daemon(work, config, "passes-1.json")
        seen = Seen(sqlite3.connect(f"file:{db}?mode=ro", uri=True))
        t = time.time()
        _adopted(seen, args.jobs, first, work / "daemon.log")
        rows.append(("first start: every job RUNNING", f"{time.time() - t:.2f} s"))
        time.sleep(args.warmup)
        first.send_signal(signal.SIGTERM)
        first.wait(120)

        t0 = time.time()
        second = _start_daemon(work, config, "passes-2.json")
        while not _answers(sock):
            if second.poll() is not None or time.time() - t0 > 300:
                raise SystemExit("the restarted daemon never answered")
            time.sleep(0.02)
        ready = time.time() - t0
        # The first pass runs to its end (however loaded the machine), then a few more.
        first_done = work / "passes-2.first"
        while not first_done.exists():
            if second.poll() is not None or time.time() - t0 > 300:
                raise SystemExit("the restarted daemon's first pass never ended")
            time.sleep(0.02)
        time.sleep(max(2.0, args.seconds / 4))
        second.send_signal(signal.SIGTERM)
        second.wait(300)
        passes = json.loads((work / "passes-2.json").read_text())
        first_pass = passes[0]
        begun = first_pass["start"] - t0
        rows += [("restart: first pass starts after", f"{begun:.2f} s (process start-up)"),
                 ("restart: socket answers after", f"{ready:.2f} s ({ready - begun:+.2f} s "
                                                   "after the pass began)"),
                 ("restart: first pass ends after", f"{first_pass['end'] - t0:.2f} s "
                  f"({first_pass['wall_s']:.2f} s wall, {first_pass['cpu_s']:.2f} s CPU, "
                  f"{first_pass.get('db_calls', 0):,.0f} aiosqlite calls"
                  f"{', STOPPED before its end' if first_pass.get('stopped') else ''})"),
                 ("restart: every sweep planned after",
                  _all_planned(passes, -(-args.jobs // args.runs_per_sweep), t0)),
                 ("restart: later passes", _pass_summary(passes[1:]))]

        third = _start_daemon(work, config, "passes-3.json")
        started = work / "passes-3.started"
        while not started.exists() and third.poll() is None:
            time.sleep(0.01)
        time.sleep(0.1)   # inside the first pass
        t1 = time.time()
        third.send_signal(signal.SIGTERM)
        third.wait(300)
        rows.append(("SIGTERM 0.1 s into the first pass: exit after",
                     f"{time.time() - t1:.2f} s (exit code {third.returncode})"))
    finally:
        writer.send_signal(signal.SIGTERM)
        writer.wait(30)
    rows.insert(0, ("jobs x lines/s", f"{args.jobs} x {args.rate:g}"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(f"work dir: {work}")
    return third.returncode == 0


def _all_planned(passes: list[dict[str, float]], sweeps: int, t0: float) -> str:
    """When the restarted daemon had planned each of its running sweeps once (a new process
    plans them all, at most `PLAN_BUDGET_S` of it per pass)."""
    done = 0.0
    for i, p in enumerate(passes):
        done += p.get("advanced", 0.0)
        if done >= sweeps:
            return f"{p['end'] - t0:.2f} s (end of pass {i + 1}, {sweeps:,} sweeps)"
    return f"not within the run ({done:,.0f} of {sweeps:,} sweeps)"


def _pass_summary(passes: list[dict[str, float]]) -> str:
    if not passes:
        return "-"
    return (f"{len(passes)}, mean {statistics.fmean(p['wall_s'] for p in passes):.2f} s wall, "
            f"{statistics.fmean(p.get('db_calls', 0.0) for p in passes):,.0f} aiosqlite calls")


def main() -> int:
    args = _args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="sweepd-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.restart:
        ok = restart(args, work)
        if args.smoke and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return 0 if ok else 1
    seen, job_index, window = run(args, work)
    # Exit 1 when a step line written in the window never reached the store: the bench (or
    # the daemon) is broken. Missed targets are a figure, not a failure.
    stored = report(args, work, seen, job_index, window)
    if args.smoke and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if stored else 1


if __name__ == "__main__":
    sys.exit(main())
