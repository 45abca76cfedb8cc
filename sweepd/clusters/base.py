"""The cluster backend protocol: what the engine needs from a scheduler.

Implementations: `sim` (embedded simulated cluster), `slurm` (real Slurm CLIs) and `local`
(one host, its jobs as process groups there, one at a time).
Every call is async and batched where the scheduler allows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

# node_states' word for a node the scheduler does not list (a typo). Not Slurm's own
# `unknown`: that is a node not yet registered after a controller restart, which a job can
# still be submitted to.
NOT_IN_CLUSTER = "not in cluster"

# sinfo short states in which a job pinned to the node cannot start (Slurm's `unknown`, a
# node not yet registered after a controller restart, is not one: a job there waits).
UNUSABLE = frozenset({"drain", "drng", "drained", "down", "fail", "failg", "maint", "inval",
                      NOT_IN_CLUSTER, "futr", "future"})

class SchedulerState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    # The scheduler no longer knows the job: judge it from its log alone.
    GONE = "GONE"

    @property
    def finished(self) -> bool:
        return self not in (SchedulerState.PENDING, SchedulerState.RUNNING,
                            SchedulerState.COMPLETING)


@dataclass(frozen=True)
class JobProfile:
    """A per-job profile, which any kind may fill: its name, and in `env` the part of the
    request's `env` that is the profile's own (the rest is the run's). Backends that can name
    settings per job use it: submit.sh mode writes the request's `xla_flags` and this `env`
    as the profile's arms into the toolkit's train_env.sh and passes
    `_env_TUNE_PROFILE=<name>` instead of them (clusters/train_env/); direct mode and the
    simulated cluster pass `xla_flags` and all of `env` to the job either way."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobRequest:
    """One submission. `token` is unique per job and is carried in the scheduler's job
    record (name or comment) so that recovery after a crash can find the job."""

    token: str
    model: str
    nodes: Sequence[str]
    output_dir: Path
    overrides: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    # Appended to the XLA_FLAGS the job inherits (its environment's, the model's env file's).
    xla_flags: Sequence[str] = ()
    # The environment variable `xla_flags` go in: XLA_FLAGS on GPU; on TPU libtpu reads its
    # XLA flags from LIBTPU_INIT_ARGS and ignores XLA_FLAGS' TPU options.
    flags_var: str = "XLA_FLAGS"
    # The job's profile (`JobProfile`); None: the job has none.
    profile: JobProfile | None = None
    # Optional `:alias:tag` parts for submit.sh-style job names.
    alias: str | None = None
    tag: str | None = None
    # Which commit the job runs (the simulated cluster applies per-commit effects).
    commit: str | None = None
    # Where to submit from (a worktree of `commit`); None: the configured repo.
    workdir: Path | None = None
    # The spec's partition (sbatch -p); None: the configured one.
    partition: str | None = None
    # This job's time limit (sbatch --time, e.g. "45:00"); None: the configured one.
    time_limit: str | None = None

    def passthrough(self) -> list[str]:
        """The run's settings as the toolkit's passthrough names them (`key=value` overrides,
        `_env_KEY=value` env): the job name and the log's header on every backend."""
        return ([f"{k}={v}" for k, v in self.overrides.items()]
                + [f"_env_{k}={v}" for k, v in self.env.items()])


@dataclass(frozen=True)
class Submitted:
    backend_id: str
    job_name: str
    log_path: Path
    # How an unclear submission was settled (adopted from the queue, duplicates cancelled):
    # the engine records it as the submission's evidence.
    note: str | None = None
    # What the submission changed outside sweepd's own directories (an arm added to the
    # toolkit's train_env.sh): the engine records it as an event.
    prepared: str | None = None
    # Overrides that left the job name only (direct mode, the simulator: the job still gets
    # them): the engine records it as an event of its own, as nothing outside was written.
    name_note: str | None = None


@dataclass(frozen=True)
class JobStatus:
    state: SchedulerState
    exit_code: int | None = None
    reason: str | None = None
    # When the job started and ended, as the scheduler says (wall seconds since the epoch;
    # None where it does not say): a job's times are the scheduler's, not when sweepd
    # noticed, which may be hours later after a restart. Not part of a status's identity.
    start: float | None = field(default=None, compare=False)
    end: float | None = field(default=None, compare=False)
    # What a pending job waits for, in words a person reads, when it is another's hold on
    # its resources that sweepd should say (the local backend: who holds the machine's one
    # accelerator slot). The engine says it in the sweep's progress lines once per change.
    waiting: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Listing:
    """What a partition holds now, with the command or source that said so (evidence)."""

    items: list[str]
    evidence: str


class ControllerUnreachable(Exception):
    """The scheduler did not answer (e.g. `slurm_load_jobs error: Connection refused`)."""


class SubmitRefused(Exception):
    """The scheduler or submit wrapper refused the job; the message says why."""


class SpecRefused(SubmitRefused):
    """A refusal the sweep's spec causes (e.g. a job name over the toolkit's limit even with
    every override carried outside it): a resume would meet it again, only a changed spec
    gets past it."""


class ClusterBackend(Protocol):
    name: str

    @property
    def submit_timeout_s(self) -> float:
        """Wall seconds after which a submission's command is killed: until then after a
        crash, that submission may still reach the queue."""
        ...

    async def submit(self, request: JobRequest) -> Submitted: ...

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        """States of all given jobs in one scheduler call. Raises ControllerUnreachable."""
        ...

    async def find_by_token(self, token: str) -> Submitted | None:
        """A job submitted with this token, if the scheduler still knows it."""
        ...

    async def live_tokens(self) -> dict[str, str]:
        """Job id -> token of every unfinished job that carries a sweepd token."""
        ...

    async def cancel(self, backend_id: str) -> None: ...

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        """Scheduler state per node, lower case (`idle`, `alloc`, `drain`, `down`...);
        `NOT_IN_CLUSTER` for a node the scheduler does not list."""
        ...

    async def resume_node(self, node: str) -> None:
        """Return a drained/down node to service; PermissionError where not allowed."""
        ...

    async def show_node(self, node: str) -> str:
        """The scheduler's full record of one node (`scontrol show node`), as evidence:
        what the scheduler said, or why it said nothing."""
        ...

    def node_shell(self) -> list[str]:
        """The command that runs a shell command on a node (`{node}` is the node; the
        remote command is added as one word): ssh on a real cluster, the simulated
        cluster's fake ssh. `recovery.ssh` in the config replaces it."""
        ...

    async def end_note(self, output_dir: Path) -> str | None:
        """What this sweep's submissions (`output_dir`: the sweep's) left outside sweepd's
        own directories, for the person at the sweep's end; None: nothing."""
        ...

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        """At the sweep's end (done, failed, aborted, cancelled), unless its spec keeps
        them: remove what its submissions put in the person's files (e.g. its arms in the
        toolkit's train_env.sh). What was removed, or why it could not be, for the record;
        None: nothing to remove."""
        ...

    async def idle_nodes(self, partition: str | None) -> Listing:
        """The nodes of `partition` (None: every partition) idle now, in name order, for a
        spec that asks for a cluster slot rather than named nodes."""
        ...

    async def others_jobs(self, partition: str | None) -> Listing:
        """Other users' pending and running jobs on `partition` (`jobid user state nodes`)."""
        ...

    async def close(self) -> None: ...
