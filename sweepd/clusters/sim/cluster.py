"""The embedded simulated cluster: a scheduler over local trainer processes.

Every job is a JSON record in `state_dir/jobs/` (`records`) and a detached trainer process
(`launch`), so jobs outlive the daemon and a new SimCluster over the same state dir (a
daemon restart) sees and keeps running them. Jobs whose nodes are busy wait, first in
first out, and start on a later poll(). The cluster's own clock (`records`) times every job
the same for the same scenario and seed, however loaded the machine is.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.clusters.base import (
    NOT_IN_CLUSTER,
    ControllerUnreachable,
    JobRequest,
    JobStatus,
    Listing,
    SchedulerState,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.process_jobs import RecordJobs
from sweepd.clusters.sim import launch
from sweepd.clusters.sim.records import PENDING, JobRecords
from sweepd.sim.scenario import load_scenario
from sweepd.sim.statefiles import atomic_write_json, locked, read_json
from sweepd.util.jobname import Fitted, JobNameTooLong, fit

FIRST_JOB_ID = 10001


class SimCluster(RecordJobs[JobRecords]):
    name = "sim"
    submit_timeout_s = 10.0   # submission is one locked file write: never in flight long

    def __init__(self, state_dir: Path, scenario_path: Path) -> None:
        self.state_dir = state_dir
        self.scenario_path = scenario_path.resolve()
        self.scenario = load_scenario(scenario_path)
        self.jobs_dir = state_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.records = JobRecords(self.jobs_dir)
        self._lock = state_dir / "scheduler.lock"

    # -- the ClusterBackend protocol -------------------------------------------------------

    # submit, poll, find_by_token, live_tokens, cancel: RecordJobs (process_jobs.py), over
    # the methods below.

    async def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        return await asyncio.to_thread(self._node_states, list(nodes))

    async def resume_node(self, node: str) -> None:
        raise PermissionError("simulated nodes never drain")

    async def show_node(self, node: str) -> str:
        state = (await self.node_states([node]))[node]
        if state == NOT_IN_CLUSTER:
            return f"Node {node} not found"
        return (f"NodeName={node} Arch=x86_64 CPUTot=128\n   Gres=gpu:8\n"
                f"   State={state.upper()} ThreadsPerCore=1\n   Partitions=sim")

    def node_shell(self) -> list[str]:
        """The fake ssh (`python -m sweepd.sim.fake_ssh`): canned dmesg, rocm-smi and
        ibstat output per node, from the scenario's `probes` and its faults."""
        return [sys.executable, "-m", "sweepd.sim.fake_ssh", "--scenario",
                str(self.scenario_path), "--state", str(self.state_dir), "{node}"]

    async def end_note(self, output_dir: Path) -> str | None:
        """The simulated cluster writes nothing outside the sweep's own directories."""
        return None

    async def remove_leftovers(self, output_dir: Path) -> str | None:
        return None

    async def idle_nodes(self, partition: str | None) -> Listing:
        """One partition: its nodes no running or queued job holds (a queued job will take
        its nodes: they are not free for a frozen slot)."""
        held = {n for r in await asyncio.to_thread(self.records.all)
                if self.records.running(r) or r["state"] == PENDING for n in r["nodes"]}
        return Listing([n for n in self.scenario.cluster.node_list if n not in held],
                       "the simulated cluster (one partition): its nodes minus those of "
                       "running or queued jobs")

    async def others_jobs(self, partition: str | None) -> Listing:
        return Listing([], "the simulated cluster has no other users")

    async def close(self) -> None:
        """Nothing to release: jobs keep running without us, by design."""

    # -- scheduling -------------------------------------------------------------------------

    def name_of(self, request: JobRequest) -> Fitted:
        """The job's name (its token in the tag): overrides that would make it too long
        leave it, and the job still gets them all. Refused (SpecRefused) when even that
        cannot make it fit."""
        tag = "-".join(p for p in (request.tag, request.token) if p)
        try:
            return fit(request.model, tag, request.passthrough())
        except JobNameTooLong as exc:
            raise SpecRefused(str(exc)) from exc

    def _submit(self, request: JobRequest) -> Submitted:
        nodes = list(request.nodes)
        known = set(self.scenario.cluster.node_list)
        unknown = [n for n in nodes if n not in known]
        if not nodes or unknown:
            raise SubmitRefused(
                f"sbatch: error: invalid node name(s) {', '.join(unknown) or '(none given)'}: "
                f"the simulated cluster has {self.scenario.cluster.nodes}")
        passthrough = request.passthrough()
        fitted = self.name_of(request)
        name = fitted.name
        with locked(self._lock):
            counter = self.state_dir / "next_job_id"
            job_id = str(read_json(counter, FIRST_JOB_ID))
            atomic_write_json(counter, int(job_id) + 1)
            log = request.output_dir / f"{job_id}-{name}.log"
            self.records.save({
                "id": job_id, "token": request.token, "job_name": name, "model": request.model,
                "nodes": nodes, "log": str(log), "overrides": dict(request.overrides),
                "env": dict(request.env), "xla_flags": list(request.xla_flags),
                "flags_var": request.flags_var,
                "commit": request.commit, "passthrough": passthrough,
                "state": PENDING, "pid": None, "pgid": None, "ticks": None, "cancelled": False,
                "after": self.records.cluster_now(),
            })
            self._schedule()
        return Submitted(job_id, name, log, name_note=fitted.note)

    def _schedule(self) -> None:
        """Start pending jobs whose nodes are free, in submission order (caller holds the lock)."""
        records = self.records.all()
        busy = {n for r in records if self.records.running(r) for n in r["nodes"]}
        for record in records:
            if record["state"] != PENDING:
                continue
            if busy.isdisjoint(record["nodes"]):
                launch.start(self.records, record, self.scenario, self.scenario_path,
                             self.state_dir)
            busy.update(record["nodes"])   # a waiting job blocks later ones on its nodes (FIFO)

    def _reachable(self) -> None:
        until = float(read_json(self.state_dir / launch.CONTROLLER_DOWN, 0.0))
        if time.time() < until:
            raise ControllerUnreachable("slurm_load_jobs error: Connection refused")

    # -- queries ----------------------------------------------------------------------------

    def _started_status(self, record: dict[str, Any]) -> JobStatus:
        code = self.records.exit_code(record["id"])
        if code is None and self.records.running(record):
            return JobStatus(SchedulerState.RUNNING)
        if code is None:   # it may have written its code and ended between the two looks
            code = self.records.exit_code(record["id"])
        if record["cancelled"]:
            return JobStatus(SchedulerState.CANCELLED, code, "scancel")
        if code is None:
            return JobStatus(SchedulerState.FAILED, None, "trainer died without an exit code")
        state = SchedulerState.COMPLETED if code == 0 else SchedulerState.FAILED
        return JobStatus(state, code)

    def _stop(self, record: dict[str, Any]) -> None:
        record["cancelled"] = True
        self.records.save(record)   # before the signal, so the exit 143 reads as a cancel
        os.killpg(record["pgid"] or record["pid"], signal.SIGTERM)

    def _node_states(self, nodes: list[str]) -> dict[str, str]:
        self._reachable()
        with locked(self._lock):
            self._schedule()
            busy = {n for r in self.records.all() if self.records.running(r) for n in r["nodes"]}
        known = set(self.scenario.cluster.node_list)
        return {n: "alloc" if n in busy else "idle" if n in known else NOT_IN_CLUSTER
                for n in nodes}
