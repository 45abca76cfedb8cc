"""What a JobRequest becomes on the command line, in both modes: sbatch's options (submit.sh
passes them on to sbatch) and the passthrough arguments (MaxText overrides, `_env_K=V`).
"""

from __future__ import annotations

import hostlist

from sweepd.clusters.base import JobRequest
from sweepd.clusters.slurm.commands import SlurmSettings
from sweepd.clusters.slurm.parse import COMMENT_PREFIX


def passthrough_args(request: JobRequest) -> list[str]:
    return request.passthrough()


def sbatch_args(settings: SlurmSettings, request: JobRequest) -> list[str]:
    args = ["-N", str(len(request.nodes)),
            "-w", hostlist.collect_hostlist(list(request.nodes))]
    # The spec's partition and the run's time limit before the configured defaults:
    # the partition the slot was resolved in is the one the jobs must run in.
    partition = request.partition or settings.partition
    if partition:
        args += ["-p", partition]
    time_limit = request.time_limit or settings.time_limit
    if time_limit:
        args += ["-t", time_limit]
    # --no-requeue: a job pinned to a node that died would be requeued by Slurm to wait
    # for that node forever; the engine decides retries itself, on evidence.
    return [*args, *settings.extra_sbatch, "--no-requeue",
            f"--comment={COMMENT_PREFIX}{request.token}"]
