"""Plays a planned job in real time: every rank in one process, or one rank under srun.

Cluster seconds are slept as `seconds * time_scale`. Every line is flushed as it is
written, since the daemon and the tests tail the log live. SIGTERM ends the job the way
scancel does: NODE_EXIT ... exit=143 and a CANCELLED summary, exit code 143.

`python -m sweepd.sim.player JOB_FILE`: the simulated cluster plans a job when it starts it
(`clusters/sim/launch.py`) and this plays the file; it imports no scenario and no pydantic,
so a job costs a fraction of the CPU a planning trainer's start does.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from sweepd.sim import logfmt
from sweepd.sim.statefiles import atomic_write_text
from sweepd.sim.timeline import BANNER, SRUN, Event, Plan, from_json

CANCEL_EXIT = 143


class _Cancelled(Exception):
    pass


def _on_term(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # one cancellation is enough
    raise _Cancelled


@dataclass(frozen=True)
class JobMeta:
    job_id: str
    job_name: str
    model: str
    nodes: tuple[str, ...]
    passthrough: tuple[str, ...]


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


class _Writer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


def _prefixed(event: Event) -> str:
    return event.text if event.rank in (BANNER, SRUN) else f"{event.rank}: {event.text}"


def _write_due(plan: Plan, t: float, written: set[int]) -> None:
    """Files the job writes (an XLA dump) once its timeline reaches them."""
    for i, (when, path, text) in enumerate(plan.files):
        if when <= t and i not in written:
            written.add(i)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def run_all_ranks(plan: Plan, meta: JobMeta, log_path: Path, time_scale: float,
                  cluster_start: float | None = None, clock_file: Path | None = None) -> int:
    """Write the whole job's log as `srun -l` would; returns the job's exit code.
    `cluster_start`: when the simulated cluster started the job on its own clock; the job
    ends its planned duration later (however long the machine took), which the summary
    prints and `clock_file` receives (the scheduler starts the next job from it)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as handle:
        out = _Writer(handle)
        for text in logfmt.header_lines(meta.job_id, meta.job_name, meta.model, meta.nodes,
                                        meta.passthrough):
            out.line(text)
        start = time.monotonic()
        written: set[int] = set()
        try:
            signal.signal(signal.SIGTERM, _on_term)
            for event in plan.events:
                _sleep_until(start + event.t * time_scale)
                _write_due(plan, event.t, written)
                out.line(_prefixed(event))
            if plan.hang:
                _sleep_forever()
            _sleep_until(start + plan.end_t * time_scale)
            code, wall, failure = plan.exit_code, plan.end_t, plan.failure
        except _Cancelled:
            wall = (time.monotonic() - start) / time_scale
            for rank, host in enumerate(meta.nodes):
                out.line(f"{rank}: {logfmt.node_exit(host, CANCEL_EXIT)}")
            for rank, host in enumerate(meta.nodes):
                out.line(f"srun: error: {host}: task {rank}: Exited with exit code {CANCEL_EXIT}")
            out.line(f"srun: Terminating StepId={meta.job_id}.3")
            code, failure = CANCEL_EXIT, None
        if clock_file is not None and cluster_start is not None:
            atomic_write_text(clock_file, f"{cluster_start + wall!r}\n")
        for text in logfmt.summary_lines(meta.job_id, meta.job_name, meta.model, meta.nodes,
                                         wall, code, failure, cluster_start):
            out.line(text)
    return code


def run_one_rank(plan: Plan, nodes: Sequence[str], rank: int, time_scale: float) -> int:
    """Slurm mode: this rank's lines to stdout, unprefixed (srun -l adds the prefix).

    Rank 0 also prints the stage banners; srun's own lines come from the real srun.
    """
    out = _Writer(sys.stdout)
    mine = [e for e in plan.events if e.rank == rank or (rank == 0 and e.rank is BANNER)]
    start = time.monotonic()
    written: set[int] = set() if rank == 0 else set(range(len(plan.files)))  # rank 0 dumps
    try:
        signal.signal(signal.SIGTERM, _on_term)
        for event in mine:
            _sleep_until(start + event.t * time_scale)
            _write_due(plan, event.t, written)
            out.line(event.text)
        if plan.hang:
            _sleep_forever()
        if mine:
            _sleep_until(start + mine[-1].t * time_scale)
        return plan.rank_exits.get(rank, 0)
    except _Cancelled:
        out.line(logfmt.node_exit(nodes[rank], CANCEL_EXIT))
        return CANCEL_EXIT


def job_file(plan: dict[str, Any], meta: JobMeta, log: Path, time_scale: float,
             cluster_start: float | None, clock_file: Path | None,
             exit_file: Path | None) -> dict[str, Any]:
    """What `main` plays: the plan (`timeline.to_json`) and where the job writes."""
    return {"plan": plan, "meta": [meta.job_id, meta.job_name, meta.model, list(meta.nodes),
                                   list(meta.passthrough)],
            "log": str(log), "time_scale": time_scale, "cluster_start": cluster_start,
            "clock_file": clock_file and str(clock_file),
            "exit_file": exit_file and str(exit_file)}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m sweepd.sim.player JOB_FILE")
    job = json.loads(Path(args[0]).read_text())   # unreadable: the job dies without a code
    exit_file = job["exit_file"] and Path(job["exit_file"])
    code = 1
    try:
        job_id, name, model, nodes, passthrough = job["meta"]
        meta = JobMeta(job_id, name, model, tuple(nodes), tuple(passthrough))
        code = run_all_ranks(from_json(job["plan"]), meta, Path(job["log"]),
                             job["time_scale"], job["cluster_start"],
                             job["clock_file"] and Path(job["clock_file"]))
    finally:
        if exit_file:
            atomic_write_text(exit_file, f"{code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
