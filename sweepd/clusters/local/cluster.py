"""The `local` backend: one box, one node (this host), jobs run one at a time.

Each job is a process group on this host under its wrapper (`wrapper.py`), its record
written (`records`) before submit returns, so a restarted daemon finds its jobs by token
and reads how a job that ended meanwhile ended. A submission while a job runs waits as
PENDING, first in first out, and starts on a later call (submit, poll, node_states) once
the node is free: never two jobs at once on the one accelerator set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    JobRequest,
    JobStatus,
    Listing,
    SchedulerState,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.local import launch, slot
from sweepd.clusters.local.records import PENDING, JobRecords
from sweepd.clusters.local.wrapper import alive, read_json, status_path, write_json
from sweepd.clusters.process_jobs import RecordJobs
from sweepd.config import LocalConfig
from sweepd.util.jobname import Fitted, JobNameTooLong, file_segment, fit
from sweepd.util.locks import locked  # the scheduler's lock: one process decides what starts

FIRST_JOB_ID = 1
# The exit code a job killed outright (its wrapper gone) is recorded with: SIGKILL's.
KILLED_EXIT = 137


def _sweep_of(token: str) -> int | None:
    """The sweep a job's token names (`sw<N>-…`), to say who holds the slot."""
    head = token.split("-", 1)[0]
    return int(head[2:]) if head.startswith("sw") and head[2:].isdigit() else None


class LocalCluster(RecordJobs[JobRecords]):
    name = "local"
    submit_timeout_s = 10.0   # a submission is a few file writes and one fork

    def __init__(self, state_dir: Path, settings: LocalConfig) -> None:
        self.state_dir = state_dir
        self.settings = settings
        self.node = settings.node_name()
        self.jobs_dir = state_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.records = JobRecords(self.jobs_dir)
        self._lock = state_dir / "scheduler.lock"
        # The machine's one accelerator slot, shared with every other sweepd process here.
        self.slot = settings.lock_path()
        self._held_by: str | None = None   # who held the slot at the last schedule

    # -- the ClusterBackend protocol -------------------------------------------------------

    # submit, poll, find_by_token, live_tokens, cancel: RecordJobs (process_jobs.py), over
    # the methods below.

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        busy = await asyncio.to_thread(self._busy)
        return {n: ("alloc" if busy else "idle") if n == self.node else NOT_IN_CLUSTER
                for n in nodes}

    async def resume_node(self, node: str) -> None:
        """This host never drains: nothing to return to service."""

    async def show_node(self, node: str) -> str:
        if node != self.node:
            return f"Node {node} not found (the local backend has one node, {self.node})"
        running = [r for r in await asyncio.to_thread(self.records.all)
                   if self.records.live(r)]
        jobs = ", ".join(f"{r['id']} ({r['state'].lower()})" for r in running) or "none"
        state = "ALLOC" if any(r["state"] != PENDING for r in running) else "IDLE"
        return (f"NodeName={node} (this host, the local backend)\n   State={state}\n"
                f"   Jobs={jobs}\n   JobsDir={self.jobs_dir}")

    def node_shell(self) -> list[str]:
        """The node is this host: a command runs in a local shell."""
        return ["sh", "-c"]

    async def end_note(self, output_dir: Path) -> str | None:
        """Nothing is written outside the sweep's own directories."""
        return None

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        """Nothing to remove: a job's settings reach it in its environment alone."""
        return None

    async def idle_nodes(self, partition: str | None) -> Listing:
        held = await asyncio.to_thread(self._held)
        return Listing([] if held else [self.node],
                       f"the local backend: its one node {self.node} (this host), "
                       + ("held by a running or queued job" if held else "no job running "
                          "or queued"))

    async def others_jobs(self, partition: str | None) -> Listing:
        return Listing([], "the local backend sees only its own jobs: processes started "
                       "on this host outside sweepd are not listed")

    async def close(self) -> None:
        """Nothing to release: jobs run on without the daemon, by design."""

    # -- naming and submitting -------------------------------------------------------------

    def name_of(self, request: JobRequest) -> Fitted:
        """The job name (the log's `<id>-<name>.log`), as direct mode builds it: overrides
        that would make it too long leave the name only (the job still gets them all)."""
        try:
            return fit(request.model, request.tag, request.passthrough())
        except JobNameTooLong as e:
            raise SpecRefused(str(e)) from e

    def _submit(self, request: JobRequest) -> Submitted:
        unknown = [n for n in request.nodes if n != self.node]
        if len(request.nodes) != 1 or unknown:
            raise SubmitRefused(f"the local backend has one node, {self.node}; the job asks "
                                f"for {', '.join(request.nodes) or 'none'}")
        fitted = self.name_of(request)
        out_dir = request.output_dir.resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        with locked(self._lock):
            counter = self.state_dir / "next_job_id"
            job_id = str(read_json(counter) or FIRST_JOB_ID)
            write_json(counter, int(job_id) + 1)
            log = out_dir / f"{job_id}-{file_segment(fitted.name)}.log"
            self.records.save({
                "id": job_id, "token": request.token, "job_name": fitted.name,
                "model": request.model, "node": self.node, "log": str(log),
                "argv": launch.train_argv(self.settings.train_command, request.overrides),
                "workdir": str(request.workdir or self.settings.workdir or "") or None,
                "env": dict(request.env), "xla_flags": list(request.xla_flags),
                "flags_var": request.flags_var,
                "output_path": str(out_dir / f"{job_id}-{file_segment(fitted.name)}"),
                "passthrough": request.passthrough(),
                "grace_s": self.settings.cancel_grace_s, "state": PENDING,
                # Who the job is, written into the slot's lock file while it holds it.
                "state_dir": str(self.state_dir.parent), "sweep": _sweep_of(request.token),
            })
            self._schedule()
        return Submitted(job_id, fitted.name, log, name_note=fitted.note)

    def _schedule(self) -> None:
        """Start the first pending job when none runs here and the machine's slot is free
        (the caller holds the scheduler lock). The slot taken is handed to the job's
        wrapper: this process lets go of it once the wrapper has it."""
        self._held_by = None
        records = self.records.all()
        if any(self.records.running(r) for r in records):
            return
        first = next((r for r in records if r["state"] == PENDING), None)
        if first is None:
            return
        try:
            fd = slot.try_take(self.slot)
        except OSError as e:
            self._held_by = f"nobody: its lock file {self.slot} cannot be opened ({e.strerror})"
            return
        if fd is None:
            self._held_by = slot.who_holds(self.slot)
            return
        try:
            slot.write_holder(fd, {"pid": os.getpid(), "state_dir": first["state_dir"],
                                   "sweep": first.get("sweep"), "job": first["id"],
                                   "since": time.time()})
            launch.start(self.records, first, self.settings.env, fd)
        finally:
            os.close(fd)

    def _scheduled(self) -> list[dict[str, Any]]:
        with locked(self._lock):
            self._schedule()
            return self.records.all()

    def _busy(self) -> bool:
        return any(self.records.running(r) for r in self._scheduled())

    def _held(self) -> bool:
        return any(self.records.live(r) for r in self._scheduled())

    # -- queries ---------------------------------------------------------------------------

    def _pending_status(self, record: dict[str, Any]) -> JobStatus:
        if self._held_by is not None and self._first_pending(record["id"]):
            waiting = f"the accelerator ({self.slot}) is held by {self._held_by}"
            return JobStatus(SchedulerState.PENDING, None, f"Resources: {waiting}",
                             waiting=f"waits for {waiting}")
        return JobStatus(SchedulerState.PENDING, None, "Resources")

    def _started_status(self, record: dict[str, Any]) -> JobStatus:
        job_id = record["id"]
        ended = self.records.status(job_id)
        if ended is None and self.records.running(record):
            return JobStatus(SchedulerState.RUNNING, start=record.get("started_at"))
        ended = ended or self.records.status(job_id)   # it may have ended between the looks
        if ended is None:
            # No status and no process: its wrapper was killed outright. Judged from its log.
            return JobStatus(SchedulerState.GONE, None, "its wrapper ended without a status",
                             start=record.get("started_at"))
        code = int(ended["exit_code"])
        start, end = ended.get("start"), ended.get("end")
        signum = ended.get("signal")
        if self.records.cancel_asked(job_id):
            return JobStatus(SchedulerState.CANCELLED, code, "cancelled by sweepd",
                             start=start, end=end)
        if ended.get("cancelled"):
            # A stop signal from outside sweepd (a person's `kill -TERM`): CANCELLED, as
            # Slurm says of a scancel sweepd did not send, so the engine's outside-cancel
            # rules judge it (`cancelled.measured` when its steady window was complete).
            what = f"signal {signum}" if isinstance(signum, int) else f"exit {code}"
            return JobStatus(SchedulerState.CANCELLED, code, f"cancelled outside sweepd "
                             f"({what})", start=start, end=end)
        state = SchedulerState.COMPLETED if code == 0 else SchedulerState.FAILED
        reason = f"killed by signal {signum}" if isinstance(signum, int) else None
        return JobStatus(state, code, reason, start=start, end=end)

    def _first_pending(self, job_id: str) -> bool:
        first = next((r for r in self.records.all() if r["state"] == PENDING), None)
        return first is not None and first["id"] == job_id

    def _stop(self, record: dict[str, Any]) -> None:
        """A running job gets the cancel marker, then its wrapper SIGTERM (it passes it to
        the trainer's group, SIGKILL after the grace period). A trainer whose wrapper is
        gone is killed here, and its status written. (A pending job left the queue:
        RecordJobs._cancel.)"""
        job_id = record["id"]
        self.records.mark_cancel(job_id)   # before the signal: the end reads as a cancel
        pids = self.records.pids(job_id)
        if not pids and alive(record.get("wrapper")):
            # Its wrapper is starting, its signal handler maybe not yet set: it reads
            # the marker before and after it starts the trainer.
            return
        wrapper: Any = pids.get("wrapper")
        if alive(wrapper):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(wrapper[0]), signal.SIGTERM)
            return
        trainer: Any = pids.get("trainer")
        if alive(trainer):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(trainer[0]), signal.SIGKILL)
        write_json(status_path(self.jobs_dir, job_id),
                   {"exit_code": KILLED_EXIT, "signal": signal.SIGKILL.value,
                    "start": record.get("started_at"), "end": time.time(),
                    "cancelled": True, "cancelled_by": "sweepd"})
