"""The embedded simulated cluster: a scheduler over local trainer processes.

Every job is a JSON record in `state_dir/jobs/` and a detached `python -m sweepd.sim train
--all-ranks` process in its own session, so jobs outlive the daemon and a new SimCluster
over the same state dir (a daemon restart) sees and keeps running them. The trainer writes
its exit code to `jobs/<id>.exit` itself, so it is recorded even when no daemon is alive.
Liveness is pid + process start time, so a recycled pid is not mistaken for the job.
Jobs whose nodes are busy wait, first in first out, and start on a later poll().

The cluster keeps its own clock, independent of how fast this machine runs the trainers:
a job starts at its submission (the latest end among the jobs ended by then) or at the
end of the jobs it queued behind, and ends its planned duration later (the trainer writes
that end to `jobs/<id>.end` and prints it in its JOB SUMMARY). So the same scenario and
seed time every job the same, however loaded the machine is.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hostlist

import sweepd
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
from sweepd.sim.faults import pick_fault
from sweepd.sim.scenario import load_scenario
from sweepd.sim.statefiles import atomic_write_json, locked, read_json
from sweepd.sim.truth import true_outcome
from sweepd.util.jobname import Fitted, JobNameTooLong, fit

FIRST_JOB_ID = 10001
PENDING, STARTED, CANCELLED = "PENDING", "STARTED", "CANCELLED"
# Detach: the shell backgrounds the trainer and exits, so the trainer is nobody's child here.
_LAUNCH = 'err=$1; shift; "$@" </dev/null >/dev/null 2>>"$err" & echo $!'


def _proc_start_ticks(pid: int) -> int | None:
    """Start time of a live (non-zombie) process, from /proc/<pid>/stat field 22."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _passthrough(request: JobRequest) -> list[str]:
    return [*(f"{k}={v}" for k, v in request.overrides.items()),
            *(f"_env_{k}={v}" for k, v in request.env.items())]


def _xla_env(inherited: str, flags: list[str]) -> dict[str, str]:
    """A run's XLA flags added to the XLA_FLAGS the trainer inherits, as direct mode's
    batch script does (`export XLA_FLAGS="${XLA_FLAGS:-} ..."`)."""
    if not flags:
        return {}
    return {"XLA_FLAGS": " ".join([inherited, *flags])}


class SimCluster:
    name = "sim"
    submit_timeout_s = 10.0   # submission is one locked file write: never in flight long

    def __init__(self, state_dir: Path, scenario_path: Path) -> None:
        self.state_dir = state_dir
        self.scenario_path = scenario_path.resolve()
        self.scenario = load_scenario(scenario_path)
        self.jobs_dir = state_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = state_dir / "scheduler.lock"

    # -- the ClusterBackend protocol -------------------------------------------------------

    async def submit(self, request: JobRequest) -> Submitted:
        return await asyncio.to_thread(self._submit, request)

    async def poll(self, backend_ids: Sequence[str]) -> dict[str, JobStatus]:
        return await asyncio.to_thread(self._poll, list(backend_ids))

    async def find_by_token(self, token: str) -> Submitted | None:
        return await asyncio.to_thread(self._find_by_token, token)

    async def live_tokens(self) -> dict[str, str]:
        return await asyncio.to_thread(self._live_tokens)

    async def cancel(self, backend_id: str) -> None:
        await asyncio.to_thread(self._cancel, backend_id)

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

    async def idle_nodes(self, partition: str | None) -> Listing:
        """One partition: its nodes no running or queued job holds (a queued job will take
        its nodes: they are not free for a frozen slot)."""
        held = {n for r in await asyncio.to_thread(self._all)
                if self._running(r) or r["state"] == PENDING for n in r["nodes"]}
        return Listing([n for n in self.scenario.cluster.node_list if n not in held],
                       "the simulated cluster (one partition): its nodes minus those of "
                       "running or queued jobs")

    async def others_jobs(self, partition: str | None) -> Listing:
        return Listing([], "the simulated cluster has no other users")

    async def close(self) -> None:
        """Nothing to release: jobs keep running without us, by design."""

    # -- records ----------------------------------------------------------------------------

    def _record_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def _exit_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.exit"

    def _load(self, job_id: str) -> dict[str, Any] | None:
        if not job_id.isdigit():
            return None
        record: dict[str, Any] | None = read_json(self._record_path(job_id))
        return record

    def _save(self, record: dict[str, Any]) -> None:
        atomic_write_json(self._record_path(record["id"]), record)

    def _all(self) -> list[dict[str, Any]]:
        ids = sorted(int(p.stem) for p in self.jobs_dir.glob("*.json") if p.stem.isdigit())
        return [r for r in (self._load(str(i)) for i in ids) if r is not None]

    def _clock_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.end"

    def _cluster_end(self, job_id: str) -> float | None:
        """When the job ended on the cluster's clock (None: not ended, or never ran)."""
        try:
            return float(self._clock_path(job_id).read_text().strip())
        except (OSError, ValueError):
            return None

    def _cluster_now(self) -> float:
        """The cluster's clock now: the latest end of the jobs that have ended."""
        ends = (self._cluster_end(p.stem) for p in self.jobs_dir.glob("*.end"))
        return max((e for e in ends if e is not None), default=0.0)

    def _cluster_start(self, record: dict[str, Any]) -> float:
        """When a starting job starts on the cluster's clock: at its submission, or when
        the last earlier job on any of its nodes ended (it queued behind that job)."""
        mine = set(record["nodes"])
        behind = (self._cluster_end(r["id"]) for r in self._all()
                  if int(r["id"]) < int(record["id"]) and not mine.isdisjoint(r["nodes"]))
        return max([float(record.get("after", 0.0)), *(e for e in behind if e is not None)])

    def _exit_code(self, job_id: str) -> int | None:
        try:
            return int(self._exit_path(job_id).read_text().strip())
        except (OSError, ValueError):
            return None

    def _running(self, record: dict[str, Any]) -> bool:
        if record["state"] != STARTED or self._exit_path(record["id"]).exists():
            return False
        return record["pid"] is not None and _proc_start_ticks(record["pid"]) == record["ticks"]

    # -- scheduling -------------------------------------------------------------------------

    def name_of(self, request: JobRequest) -> Fitted:
        """The job's name (its token in the tag): overrides that would make it too long
        leave it, and the job still gets them all. Refused (SpecRefused) when even that
        cannot make it fit."""
        tag = "-".join(p for p in (request.tag, request.token) if p)
        try:
            return fit(request.model, tag, _passthrough(request))
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
        passthrough = _passthrough(request)
        fitted = self.name_of(request)
        name = fitted.name
        with locked(self._lock):
            counter = self.state_dir / "next_job_id"
            job_id = str(read_json(counter, FIRST_JOB_ID))
            atomic_write_json(counter, int(job_id) + 1)
            log = request.output_dir / f"{job_id}-{name}.log"
            self._save({
                "id": job_id, "token": request.token, "job_name": name, "model": request.model,
                "nodes": nodes, "log": str(log), "overrides": dict(request.overrides),
                "env": dict(request.env), "xla_flags": list(request.xla_flags),
                "commit": request.commit, "passthrough": passthrough,
                "state": PENDING, "pid": None, "pgid": None, "ticks": None, "cancelled": False,
                "after": self._cluster_now(),
            })
            self._schedule()
        return Submitted(job_id, name, log, name_note=fitted.note)

    def _schedule(self) -> None:
        """Start pending jobs whose nodes are free, in submission order (caller holds the lock)."""
        records = self._all()
        busy = {n for r in records if self._running(r) for n in r["nodes"]}
        for record in records:
            if record["state"] != PENDING:
                continue
            if busy.isdisjoint(record["nodes"]):
                self._start(record)
            busy.update(record["nodes"])   # a waiting job blocks later ones on its nodes (FIFO)

    def _start(self, record: dict[str, Any]) -> None:
        self._arm_controller_down(record)
        Path(record["log"]).parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "sweepd.sim", "train",
               "--scenario", str(self.scenario_path), "--model", record["model"],
               "--job-id", record["id"], "--job-name", record["job_name"],
               "--nodes", hostlist.collect_hostlist(record["nodes"]),
               "--all-ranks", "--log", record["log"], "--state-dir", str(self.state_dir),
               "--exit-file", str(self._exit_path(record["id"])),
               "--cluster-start", repr(self._cluster_start(record)),
               "--clock-file", str(self._clock_path(record["id"]))]
        if record["commit"]:
            cmd += ["--commit", record["commit"]]
        cmd += ["--", *record["passthrough"]]
        err = self.jobs_dir / f"{record['id']}.stderr"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(sweepd.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
        # The run's env (exported first in direct mode) may set XLA_FLAGS: the flags add to it.
        inherited = record["env"].get("XLA_FLAGS", env.get("XLA_FLAGS", ""))
        env.update(_xla_env(inherited, record.get("xla_flags", [])))
        launched = subprocess.run(["sh", "-c", _LAUNCH, "sh", str(err), *cmd], env=env,
                                  capture_output=True, text=True, check=True,
                                  start_new_session=True)
        pid = int(launched.stdout.strip())
        try:
            pgid: int | None = os.getpgid(pid)
        except ProcessLookupError:
            pgid = None
        record.update(state=STARTED, pid=pid, pgid=pgid, ticks=_proc_start_ticks(pid),
                      started_at=time.time())
        self._save(record)

    def _arm_controller_down(self, record: dict[str, Any]) -> None:
        """A controller_down fault starts its outage when the first job hitting it starts."""
        try:
            batch = true_outcome(self.scenario, record["model"], record["nodes"],
                                 record["overrides"], record["env"], record["commit"]).batch
            fault = pick_fault(self.scenario, self.state_dir, record["id"], record["model"],
                               record["nodes"], batch, controller=True)
        except ValueError:       # an unknown model or bad override: the trainer reports it
            return
        if fault is not None and fault.seconds is not None:
            until = time.time() + fault.seconds * self.scenario.cluster.time_scale
            path = self.state_dir / "controller_down.json"
            atomic_write_json(path, max(until, float(read_json(path, 0.0))))

    def _check_controller(self) -> None:
        until = float(read_json(self.state_dir / "controller_down.json", 0.0))
        if time.time() < until:
            raise ControllerUnreachable("slurm_load_jobs error: Connection refused")

    # -- queries ----------------------------------------------------------------------------

    def _status(self, record: dict[str, Any]) -> JobStatus:
        if record["state"] == CANCELLED:
            return JobStatus(SchedulerState.CANCELLED, None, "cancelled while pending")
        if record["state"] == PENDING:
            return JobStatus(SchedulerState.PENDING, None, "Resources")
        code = self._exit_code(record["id"])
        if code is None and self._running(record):
            return JobStatus(SchedulerState.RUNNING)
        if record["cancelled"]:
            return JobStatus(SchedulerState.CANCELLED, code, "scancel")
        if code is None:
            return JobStatus(SchedulerState.FAILED, None, "trainer died without an exit code")
        state = SchedulerState.COMPLETED if code == 0 else SchedulerState.FAILED
        return JobStatus(state, code)

    def _poll(self, ids: list[str]) -> dict[str, JobStatus]:
        self._check_controller()
        with locked(self._lock):
            self._schedule()
        result: dict[str, JobStatus] = {}
        for job_id in ids:
            record = self._load(job_id)
            result[job_id] = (JobStatus(SchedulerState.GONE) if record is None
                              else self._status(record))
        return result

    def _find_by_token(self, token: str) -> Submitted | None:
        self._check_controller()
        for record in self._all():
            if record["token"] == token:
                return Submitted(record["id"], record["job_name"], Path(record["log"]))
        return None

    def _live_tokens(self) -> dict[str, str]:
        self._check_controller()
        return {r["id"]: r["token"] for r in self._all()
                if r["state"] == PENDING or self._running(r)}

    def _cancel(self, job_id: str) -> None:
        with locked(self._lock):
            record = self._load(job_id)
            if record is None:
                return
            if record["state"] == PENDING:
                record["state"] = CANCELLED
                self._save(record)
            elif self._running(record):
                record["cancelled"] = True
                self._save(record)   # before the signal, so the exit 143 reads as a cancel
                os.killpg(record["pgid"] or record["pid"], signal.SIGTERM)

    def _node_states(self, nodes: list[str]) -> dict[str, str]:
        self._check_controller()
        with locked(self._lock):
            self._schedule()
            busy = {n for r in self._all() if self._running(r) for n in r["nodes"]}
        known = set(self.scenario.cluster.node_list)
        return {n: "alloc" if n in busy else "idle" if n in known else NOT_IN_CLUSTER
                for n in nodes}
