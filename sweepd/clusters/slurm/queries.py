"""Asking Slurm about jobs and nodes: squeue, scontrol, sacct, scancel, sinfo. A job the
controller has forgotten is an answer (GONE, its times from accounting), not an outage.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Sequence
from pathlib import Path

import hostlist

from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    ControllerUnreachable,
    JobStatus,
    Listing,
    SchedulerState,
    Submitted,
)
from sweepd.clusters.slurm.commands import (
    UNREACHABLE,
    Commands,
    SlurmCommandError,
    SlurmSettings,
    raise_for,
)
from sweepd.clusters.slurm.parse import (
    parse_node_states,
    parse_sacct_times,
    parse_scontrol_job,
    parse_squeue_poll,
    token_matches,
    token_of,
)

# Asking about ids the controller has forgotten: an answer, not an outage.
_UNKNOWN_JOB = re.compile(r"Invalid job id specified", re.IGNORECASE)
_ALREADY_DONE = re.compile(r"already completing or completed|Invalid job id", re.IGNORECASE)


class Queries:
    """The scheduler's answers about jobs and nodes, and cancelling a job."""

    def __init__(self, commands: Commands, settings: SlurmSettings) -> None:
        self._cmd = commands
        self.settings = settings
        self._remote_user: str | None = None   # who Slurm sees behind the command prefix

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        ids = list(dict.fromkeys(backend_ids))
        if not ids:
            return {}
        res = await self._cmd.run(["squeue", "--noheader", "--states=all", "-j", ",".join(ids),
                                   "-O", "JobID:|,State:|,exit_code:|,Reason:|,StartTime:|,"
                                   "EndTime:"])
        if res.rc != 0 and not _UNKNOWN_JOB.search(res.err):
            raise_for("squeue", res)
        found = parse_squeue_poll(res.out) if res.rc == 0 else {}
        result: dict[str, JobStatus] = {}
        for job_id in ids:
            status = found.get(job_id)
            if status is None:
                status = await self._scontrol_status(job_id)
            result[job_id] = status
        return result

    async def _scontrol_status(self, job_id: str) -> JobStatus:
        res = await self._cmd.run(["scontrol", "show", "job", job_id])
        if res.rc != 0:
            if _UNKNOWN_JOB.search(res.err):
                return await self._gone(job_id)
            raise_for("scontrol", res)
        return parse_scontrol_job(res.out) or await self._gone(job_id)

    async def _gone(self, job_id: str) -> JobStatus:
        """A job the controller has forgotten (MinJobAge passed): its times from accounting
        where the cluster keeps it; without accounting, none (the log's own times serve)."""
        try:
            res = await self._cmd.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "Start,End"])
        except SlurmCommandError:   # no sacct on this host
            return JobStatus(SchedulerState.GONE)
        start, end = parse_sacct_times(res.out) if res.rc == 0 else (None, None)
        return JobStatus(SchedulerState.GONE, start=start, end=end)

    async def job_record(self, job_id: str) -> tuple[str, Path | None] | None:
        """(job name, expanded StdOut path) from `scontrol show job -o`."""
        res = await self._cmd.run(["scontrol", "show", "job", "-o", job_id])
        if res.rc != 0:
            if _UNKNOWN_JOB.search(res.err):
                return None
            raise_for("scontrol", res)
        # JobName may hold spaces in general, but the next field is always UserId.
        name = re.search(r"\bJobName=(.*?) UserId=", res.out)
        stdout = re.search(r"\bStdOut=(\S+)", res.out)
        if name is None:
            return None
        return name.group(1), Path(stdout.group(1)) if stdout else None

    async def jobs_with_token(self, token: str) -> list[int]:
        res = await self._cmd.run(["squeue", "--noheader", "--states=all",
                                   "-O", "JobID:|,Comment:1000|,Name:"])
        if res.rc != 0:
            raise_for("squeue", res)
        matches: list[int] = []
        for line in res.out.splitlines():
            parts = [p.strip() for p in line.split("|", 2)]
            if len(parts) == 3 and parts[0].isdigit() and token_matches(token, parts[2], parts[1]):
                matches.append(int(parts[0]))
        return matches

    async def find_by_token(self, token: str) -> Submitted | None:
        matches = await self.jobs_with_token(token)
        if not matches:
            return None
        job_id = str(max(matches))  # a resubmission under the same token is the live one
        record = await self.job_record(job_id)
        if record is None or record[1] is None:
            return None
        return Submitted(job_id, record[0], record[1])

    async def live_tokens(self) -> dict[str, str]:
        """Job id -> sweepd token of every job not yet finished that carries one."""
        res = await self._cmd.run(["squeue", "--noheader", "-O", "JobID:|,Comment:1000|,Name:"])
        if res.rc != 0:
            raise_for("squeue", res)
        found: dict[str, str] = {}
        for line in res.out.splitlines():
            parts = [p.strip() for p in line.split("|", 2)]
            token = token_of(parts[2], parts[1]) if len(parts) == 3 else None
            if token is not None and parts[0].isdigit():
                found[parts[0]] = token
        return found

    async def cancel(self, backend_id: str) -> None:
        res = await self._cmd.run(["scancel", backend_id])
        if res.rc != 0 and not _ALREADY_DONE.search(res.err):
            raise_for("scancel", res)

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        if not nodes:
            return {}
        res = await self._cmd.run(["sinfo", "-N", "-h", "-n",
                                   hostlist.collect_hostlist(list(nodes)), "-o", "%N|%T"])
        if res.rc != 0:
            raise_for("sinfo", res)
        states = parse_node_states(res.out)
        return {n: states.get(n, NOT_IN_CLUSTER) for n in nodes}

    async def resume_node(self, node: str) -> None:
        """Return a drained/down node to service (xla-tuning.SKILL.md: drained node -> RESUME)."""
        if not self.settings.allow_resume:
            raise PermissionError("resuming nodes is not allowed (cluster.slurm.allow_resume)")
        res = await self._cmd.run(["scontrol", "update", f"NodeName={node}", "State=RESUME",
                                   "Reason=sweepd"])
        if res.rc != 0:
            raise_for("scontrol", res)

    async def show_node(self, node: str) -> str:
        res = await self._cmd.run(["scontrol", "show", "node", node])
        if res.rc != 0:
            text = (res.err or res.out).strip()
            if UNREACHABLE.search(text):
                raise ControllerUnreachable(f"scontrol: {text}")
            return f"scontrol exited {res.rc}: {text}"
        return res.out


    async def ping(self) -> None:
        """Whether the Slurm client can talk to its controller: returns when it answers;
        ControllerUnreachable when it is configured but away (wait, as for an outage);
        SlurmCommandError when the client cannot run at all (no configuration source, a
        bad slurm.conf): a configuration problem, refused at start."""
        res = await self._cmd.run(["sinfo", "-h", "-o", "%P"])
        if res.rc != 0:
            raise_for("sinfo", res)


    async def partitions(self) -> list[str]:
        """The cluster's partitions as sinfo lists them, the default one marked
        `NAME (default)` (sinfo's `*`)."""
        res = await self._cmd.run(["sinfo", "-h", "-o", "%P"])
        if res.rc != 0:
            raise_for("sinfo", res)
        names = dict.fromkeys(line.strip() for line in res.out.splitlines() if line.strip())
        return [f"{n[:-1]} (default)" if n.endswith("*") else n for n in names]

    async def idle_nodes(self, partition: str | None) -> Listing:
        argv = ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N", *_partition_args(partition)]
        res = await self._cmd.run(argv)
        if res.rc != 0:
            raise_for("sinfo", res)
        found = hostlist.numerically_sorted(
            {line.strip() for line in res.out.splitlines() if line.strip()})
        return Listing(found, f"{' '.join(argv)}: {hostlist.collect_hostlist(found) or 'none'}")

    async def _user(self) -> str:
        """The user Slurm's commands run as: behind a `command_prefix` (ssh to a login node,
        sudo -u) that is the remote one, asked there once; locally, this process's."""
        if not self.settings.command_prefix:
            return getpass.getuser()
        if self._remote_user is None:
            res = await self._cmd.run(["id", "-un"])
            name = res.out.strip()
            if res.rc != 0 or not name:
                raise SlurmCommandError(f"id -un behind {self.settings.command_prefix[0]} "
                                        f"exited {res.rc}: {(res.err or res.out).strip()}")
            self._remote_user = name
        return self._remote_user

    async def others_jobs(self, partition: str | None) -> Listing:
        argv = ["squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i|%u|%T|%N",
                *_partition_args(partition)]
        res = await self._cmd.run(argv)
        if res.rc != 0:
            raise_for("squeue", res)
        me = await self._user()
        rows = [line.split("|") for line in res.out.splitlines() if line.count("|") == 3]
        return Listing([" ".join(r) for r in rows if r[1] != me],
                       f"{' '.join(argv)} (users other than {me})")


def _partition_args(partition: str | None) -> list[str]:
    return ["-p", partition] if partition else []
