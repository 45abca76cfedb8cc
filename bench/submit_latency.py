"""Submit -> first job latency of the daemon (not a test, not part of the package).

    python bench/submit_latency.py [--sweeps 20] [--tick 0.5] [--smoke]

Runs the daemon's own parts in this process (`open_parts` + `engine_loop`, the embedded
simulated cluster, the default tick), submits one model perf sweep at a time through the
service the API calls, and measures the wall time from the submit's return to the sweep's
first job row in the store (written before the scheduler is called). Each sweep is aborted
once its first job is in the queue, so the next one starts on an idle daemon. Prints the median,
the 90th percentile and the worst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Runnable from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.app.daemon import engine_loop, open_parts
from sweepd.config import load_config
from sweepd.sim.scenario import DEMO_NODES
from sweepd.store.states import JobState
from sweepd.store.store import Store

SPEC = {"kind": "model-perf", "model": "llama2-70b", "nodes": DEMO_NODES}
POLL_S = 0.002


async def _first_job(store: Store, sweep_id: int) -> None:
    # Polled from outside, as a client would see it; no engine event is waited on.
    while not await store.jobs.of_sweep(sweep_id):  # noqa: ASYNC110
        await asyncio.sleep(POLL_S)


async def _submitted(store: Store, sweep_id: int) -> None:
    # An abort while the job's sbatch is under way would race the submission's own record.
    while any(j.state == JobState.SUBMITTING for j in await store.jobs.of_sweep(sweep_id)):  # noqa: ASYNC110
        await asyncio.sleep(POLL_S)


async def measure(sweeps: int, tick_s: float) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="sweepd-latency-") as tmp:
        config = load_config(None, {"daemon.state_dir": str(Path(tmp) / "state"),
                                    "daemon.tick_s": tick_s})
        async with open_parts(config) as parts:
            stop = asyncio.Event()
            loop = asyncio.create_task(engine_loop(parts.engine, stop, tick_s), name="engine")
            await asyncio.sleep(2 * tick_s)   # past the first (recovery) pass
            latencies = []
            phase = random.Random(13)
            try:
                for _ in range(sweeps):
                    summary = await parts.service.submit(SPEC)
                    start = time.perf_counter()
                    await asyncio.wait_for(_first_job(parts.store, summary["id"]), 60)
                    latencies.append(time.perf_counter() - start)
                    await asyncio.wait_for(_submitted(parts.store, summary["id"]), 60)
                    await parts.service.abort(summary["id"])
                    await asyncio.sleep(phase.uniform(0, tick_s))   # any phase of the tick
            finally:
                stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--tick", type=float, default=0.5, help="engine tick (default: 0.5)")
    parser.add_argument("--smoke", action="store_true", help="two sweeps: seconds")
    args = parser.parse_args()
    if args.smoke:
        args.sweeps = 2
    found = sorted(asyncio.run(measure(args.sweeps, args.tick)))
    p90 = found[min(len(found) - 1, int(0.9 * len(found)))]
    print(f"submit -> first job row, {len(found)} sweeps, tick {args.tick:g} s: "
          f"median {1000 * statistics.median(found):.0f} ms, p90 {1000 * p90:.0f} ms, "
          f"worst {1000 * found[-1]:.0f} ms")


if __name__ == "__main__":
    main()
