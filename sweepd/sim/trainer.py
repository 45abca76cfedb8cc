"""Runs a job's timeline in real time: every rank in one process, or one rank under srun.

Cluster seconds are slept as `seconds * time_scale`. Every line is flushed as it is
written, since the daemon and the tests tail the log live. SIGTERM ends the job the way
scancel does: NODE_EXIT ... exit=143 and a CANCELLED summary, exit code 143.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TextIO

from sweepd.sim import logfmt
from sweepd.sim.faults import pick_fault
from sweepd.sim.hooks import JobPlace, sim_hooks
from sweepd.sim.jobinput import JobInput
from sweepd.sim.plan import BANNER, SRUN, Event, Plan, plan_job
from sweepd.sim.scenario import FaultKind, FaultSpec, Scenario
from sweepd.sim.statefiles import atomic_write_text
from sweepd.sim.truth import true_outcome
from sweepd.util.model_shapes import UnknownModel, resolve_model

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


def build_input(scenario: Scenario, state_dir: Path, meta: JobMeta, overrides: Mapping[str, str],
                env: Mapping[str, str], commit: str | None,
                process_env: Mapping[str, str] | None = None,
                out_dir: Path | None = None) -> JobInput:
    """Ask the truth and the fault table what happens to this job.

    `process_env` is the job's own environment (XLA_FLAGS sweepd appended, NCCL_* ...; default
    os.environ), `out_dir` its output directory (the XLA dump goes under it)."""
    base = JobInput(scenario=scenario, model=meta.model, job_id=meta.job_id, nodes=meta.nodes,
                    overrides=overrides, truth=None)
    try:
        model = resolve_model(meta.model).name
    except UnknownModel:
        return replace(base, fault=FaultSpec(kind=FaultKind.CONFIG_ERROR))
    place = JobPlace(state_dir, env, process_env, out_dir)
    for hook in sim_hooks():   # a kind that models this model's jobs decides them
        section = scenario.section(hook.section)
        job = None if section is None else hook.job(replace(base, model=model), section, place)
        if job is not None:
            return job
    try:
        truth = true_outcome(scenario, model, meta.nodes, overrides, env, commit)
    except ValueError as exc:
        return replace(base, model=model, error=str(exc))
    if truth.fail is not None:       # a broken commit fails before any hardware fault matters
        return replace(base, model=model, truth=truth, fault=FaultSpec(kind=truth.fail))
    fault = pick_fault(scenario, state_dir, meta.job_id, model, meta.nodes, truth.batch)
    return replace(base, model=model, truth=truth, fault=fault)


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


__all__ = ["JobMeta", "build_input", "plan_job", "run_all_ranks", "run_one_rank"]
