"""Does the dashboard slow the engine? The engine's pass with 0 and with N browsers on the
dashboard's live streams (a benchmark, not a test).

    python bench/web_clients.py [--clients 5] [--phase-s 20] [--rounds 2] [--sweeps 4] [--smoke]

One process runs what the daemon runs on its loop: the engine on the simulated cluster
(`app.daemon.open_parts`), `--sweeps` model-perf sweeps running, and the dashboard
(`web/server.start_web`, its default refresh: 2 s). Each pass is timed as `engine_loop` times it
(`engine.step()`, wall), in phases that alternate between no browser and `--clients` of
them, each a `curl -N` process of its own on a sweep's event stream (or the index's); one of
them is stopped (SIGSTOP) for the whole phase: a browser that reads nothing, whose queue
must drop updates rather than hold anything. The phases alternate so that the sweeps' own
course (more runs, bigger pages) falls on both alike. `--smoke`: 2 s phases, one round;
exits 1 unless both phases timed passes and the live browsers received pages.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.app.daemon import first_of, open_parts
from sweepd.config import load_config
from sweepd.util import logs
from sweepd.web.server import FEEDS, start_web
from sweepd.web.token import ensure_token

NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881]"
SCENARIO = f"""cluster: {{nodes: "{NODES}", gpu: MI300X, gpu_memory_gib: 192, time_scale: 0.01,
  noise: 0.003, seed: 3}}
models: {{llama2-70b: {{max_batch: 14, peak_batch: 10, peak_tgs: 1400}}}}
faults: []
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(work: Path, clients: int, phase_s: float, rounds: int,
                sweeps: int) -> tuple[dict[int, list[float]], list[int], int]:
    (work / "scenario.yaml").write_text(SCENARIO)
    port = free_port()
    config = load_config(None, {
        "daemon.state_dir": str(work / "state"), "daemon.socket": str(work / "sweepd.sock"),
        "daemon.tick_s": 0.1, "cluster.sim": {"scenario": str(work / "scenario.yaml")},
        "web.listen": f"127.0.0.1:{port}"})   # its default refresh, 2 s
    passes: dict[int, list[float]] = {0: [], clients: []}
    received: list[int] = []
    async with open_parts(config) as parts:
        runner = await start_web(parts.service, config)
        token = ensure_token(config.daemon.state_dir)
        ids = [int((await parts.service.submit(
            {"kind": "model-perf", "model": "llama2-70b", "nodes": NODES,
             "name": f"web bench {i}"}))["id"]) for i in range(sweeps)]
        try:
            for _ in range(rounds):
                for n in (0, clients):
                    procs, outs = _browsers(work, port, token, ids, n)
                    deadline = time.monotonic() + phase_s
                    while time.monotonic() < deadline:
                        t = time.perf_counter()
                        await parts.engine.step()
                        passes[n].append(time.perf_counter() - t)
                        await first_of(config.daemon.tick_s, parts.engine.changed)
                    for p in procs:
                        p.send_signal(signal.SIGCONT)
                        p.terminate()
                        p.wait(10)
                    received += [o.read_text().count("event: page") for o in outs[1:]]
            dropped = runner.app[FEEDS].dropped
        finally:
            await runner.cleanup()
    return passes, received, dropped


def _browsers(work: Path, port: int, token: str, ids: list[int],
              n: int) -> tuple[list[subprocess.Popen[bytes]], list[Path]]:
    """`n` curl processes on the event streams; the first one stopped (reads nothing)."""
    procs, outs = [], []
    for k in range(n):
        path = "/events" if k == n - 1 else f"/sweeps/{ids[k % len(ids)]}/events"
        out = work / f"client-{k}-{time.monotonic_ns()}.txt"
        procs.append(subprocess.Popen(
            ["curl", "-sN", "-H", f"Cookie: sweepd_token={token}", "-o", str(out),
             f"http://127.0.0.1:{port}{path}"]))
        outs.append(out)
    if procs:
        procs[0].send_signal(signal.SIGSTOP)
    return procs, outs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=5)
    p.add_argument("--phase-s", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sweeps", type=int, default=4)
    p.add_argument("--smoke", action="store_true", help="2 s phases, one round")
    args = p.parse_args()
    if args.smoke:
        args.phase_s, args.rounds, args.sweeps = 2.0, 1, 2
    if shutil.which("curl") is None:
        print("curl is needed (the browsers)", file=sys.stderr)
        return 1
    logs.configure("warning", json=False)   # the engine's info lines are not the figures
    work = Path(tempfile.mkdtemp(prefix="sweepd-web-bench-"))
    try:
        passes, received, dropped = asyncio.run(
            bench(work, args.clients, args.phase_s, args.rounds, args.sweeps))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.sweeps} sweeps on the simulated cluster, {args.rounds} round(s) of "
          f"{args.phase_s:g} s phases, load average {os.getloadavg()[0]:.2f}")
    print(f"{'browsers':>8}  {'passes':>6}  {'p50 ms':>7}  {'p99 ms':>7}  {'max ms':>7}")
    for n, times in passes.items():
        if times:
            print(f"{n:>8}  {len(times):>6}  {statistics.median(times) * 1e3:>7.1f}  "
                  f"{pct(times, 0.99) * 1e3:>7.1f}  {max(times) * 1e3:>7.1f}")
    print(f"pages received per live browser and phase: {received}; updates dropped for "
          f"the stopped browser(s): {dropped}")
    ok = all(passes.values()) and bool(received) and all(r > 0 for r in received)
    if args.smoke:
        print(f"smoke: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
