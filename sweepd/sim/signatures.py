"""What each failure prints, on which rank, in which order (maxtext-slurm-facts.md §3).

The root cause is always first in time; the cascade (collective timeouts on the other
ranks, heartbeat loss) follows it, as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweepd.sim import logfmt
from sweepd.sim.scenario import FaultKind

if TYPE_CHECKING:
    from sweepd.sim.jobinput import JobInput

Add = Callable[[float, "int | None", str], None]
CASCADE_S = 60.0      # how long the other ranks wait before their collectives time out


@dataclass(frozen=True)
class Failure:
    rank_exits: dict[int, int]
    exit_code: int
    text: str


def _everyone(job: JobInput, code: int) -> dict[int, int]:
    return dict.fromkeys(range(len(job.nodes)), code)


def _cascade(add: Add, job: JobInput, t: float, root: int, code: int) -> tuple[float, Failure]:
    """The root rank died with `code`; the others time out in their next collective."""
    exits = _everyone(job, 1)
    exits[root] = code
    others = [r for r in range(len(job.nodes)) if r != root]
    for r in others:
        add(t + CASCADE_S + 0.1 * r, r, f"[{job.nodes[r]}] NCCL WARN Timeout waiting for "
                                        f"collective operation (peer rank {root}) after 60s")
    if others:
        add(t + CASCADE_S + 5, 0 if root else others[0],
            "The following tasks are unhealthy (stopped sending heartbeats): "
            f"/job:jax_worker/replica:0/task:{root}")
    return t + (CASCADE_S + 6 if others else 1), Failure(exits, code, "Training failed")


def _all_ranks(add: Add, job: JobInput, t: float, lines: list[str],
               code: int) -> tuple[float, Failure]:
    for r in range(len(job.nodes)):
        for i, line in enumerate(lines):
            add(t + 0.05 * r + 0.01 * i, r, line)
    return t + 1, Failure(_everyone(job, code), code, "Training failed")


def _flag(job: JobInput) -> str:
    return job.fault.flag if job.fault else "--xla_foo"


def failure_events(add: Add, job: JobInput, t: float, rank: int) -> tuple[float, Failure]:
    """Print the failure starting at t (root cause on `rank`); returns (end time, failure)."""
    kind = job.fault.kind if job.fault else None
    if job.error is not None:
        return _all_ranks(add, job, t, [
            "Traceback (most recent call last):",
            '  File "/workspace/maxtext/MaxText/train.py", line 1082, in <module>',
            f"ValueError: {job.error}"], 1)
    if kind is FaultKind.ENVIRONMENT:
        return _all_ranks(add, job, t, [
            "Traceback (most recent call last):",
            '  File "/workspace/maxtext/MaxText/train.py", line 31, in <module>',
            "    import jax",
            "ModuleNotFoundError: No module named 'jax'"], 1)
    if kind is FaultKind.CONFIG_ERROR:
        return _all_ranks(add, job, t, [f"!!! Unknown model: {job.model}"], 1)
    if kind is FaultKind.UNKNOWN_FLAG and job.kind_job is not None \
            and (said := job.kind_job.unknown_flag(_flag(job))) is not None:
        return _all_ranks(add, job, t, *said)
    if kind is FaultKind.UNKNOWN_FLAG:
        return _all_ranks(add, job, t, [
            f"F0000 00:00:1718000000.000000    4242 parse_flags_from_env.cc:226] "
            f"Unknown flag: {_flag(job)}",
            "*** Check failure stack trace: ***"], 134)
    if kind is FaultKind.COORD_TIMEOUT:
        waiters = [r for r in range(len(job.nodes)) if r != 0] or [0]
        for r in waiters:
            add(t + 0.05 * r, r, "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
                                 "jax_global_device_ids/0 and duration: 300s")
        return t + 1, Failure(_everyone(job, 1), 1, "Training failed")
    if kind is FaultKind.HSA_ERROR:
        add(t, rank, ":0:rocdevice.cpp            :2984: 4242424242 us: [pid:4242  tid:0x7f3a] "
                     "Callback: Queue 0x7f3a00000000 aborting with error : "
                     "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware "
                     "exception. code: 0x1016")
        add(t + 0.01, rank, ":0:rocdevice.cpp: Aborting")
        return _cascade(add, job, t, rank, 134)
    if kind is FaultKind.HOST_OOM:
        add(t, rank, f"[{job.nodes[rank]}] Out of memory: Killed process 4242 (python3) "
                     "total-vm:1843200000kB, anon-rss:1790000000kB (oom-kill)")
        add(t + 0.01, rank, "Killed")
        return _cascade(add, job, t, rank, 137)
    if kind is FaultKind.NODE_CRASH:
        # The node just dies; the others are fine until srun kills the step.
        exits = _everyone(job, 0)
        exits[rank] = 1
        return t, Failure(exits, 1, "Training failed")
    alloc = job.truth.alloc_gib if job.truth and job.truth.alloc_gib else 12.5
    oom = logfmt.oom_line(alloc)
    if kind is None:
        # Over the memory budget: the same program on every rank, so each one fails its
        # first allocation. (Printed by one rank only, srun could end the step before a
        # late-starting rank printed it, and the OOM would read as a node crash.) An
        # injected OOM fault stays one rank's, cascading to the others.
        return _all_ranks(add, job, t, [oom], 1)
    add(t, rank, oom)
    return _cascade(add, job, t, rank, 1)


def hang_events(add: Add, job: JobInput, t: float) -> float:
    """Lines before a hang in RCCL/IB init (rccl_flake) or before Memstats; returns its time."""
    if job.fault and job.fault.kind is FaultKind.RCCL_FLAKE:
        for r, host in enumerate(job.nodes):
            add(t + 0.05 * r, r, f"{host}:4242:4300 [0] NCCL INFO Bootstrap : Using eth0")
            add(t + 0.05 * r + 0.01, r, f"{host}:4242:4300 [0] NCCL INFO NET/IB : Using "
                                        "[0]ionic_0:1/RoCE")
    return t + 1
