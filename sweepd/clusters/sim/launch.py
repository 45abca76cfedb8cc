"""Starting a simulated job: a detached process in its own session, so it outlives the
daemon: the job planned here and `python -m sweepd.sim.player` playing it (else `python -m
sweepd.sim train --all-ranks`, which plans it itself). It writes its exit code and its end on
the cluster's clock itself, so they are recorded even when no daemon is alive. A scenario's
controller outage begins when the first job it hits starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hostlist

import sweepd
from sweepd.clusters.proc_ticks import start_ticks
from sweepd.clusters.sim.records import STARTED, JobRecords
from sweepd.sim.faults import pick_fault
from sweepd.sim.player import JobMeta, job_file
from sweepd.sim.scenario import Scenario, load_scenario
from sweepd.sim.statefiles import atomic_write_json, read_json
from sweepd.sim.timeline import to_json
from sweepd.sim.trainer import plan_command
from sweepd.sim.truth import true_outcome

# Detach: the shell backgrounds the trainer and exits, so the trainer is nobody's child here.
_LAUNCH = 'err=$1; shift; "$@" </dev/null >/dev/null 2>>"$err" & echo $!'
CONTROLLER_DOWN = "controller_down.json"   # until when (wall clock) the controller is away


def xla_env(inherited: str, flags: list[str], var: str = "XLA_FLAGS") -> dict[str, str]:
    """A run's XLA flags added to the variable the trainer inherits, as direct mode's
    batch script does (`export XLA_FLAGS="${XLA_FLAGS:-} ..."`; `var` LIBTPU_INIT_ARGS on
    TPU, `JobRequest.flags_var`)."""
    if not flags:
        return {}
    return {var: " ".join([inherited, *flags])}


def start(records: JobRecords, record: dict[str, Any], scenario: Scenario,
          scenario_path: Path, state_dir: Path) -> None:
    """Start the job's trainer and record it STARTED with its pid (the caller holds the
    scheduler lock)."""
    arm_controller_down(scenario, state_dir, record)
    Path(record["log"]).parent.mkdir(parents=True, exist_ok=True)
    err = records.jobs_dir / f"{record['id']}.stderr"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(sweepd.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    # Direct mode's batch script exports the job's OUTPUT_PATH (the run's own, else the
    # job's directory beside its log) over whatever the daemon's shell carried.
    env.pop("OUTPUT_PATH", None)
    if record["env"].get("OUTPUT_PATH"):
        env["OUTPUT_PATH"] = str(record["env"]["OUTPUT_PATH"])
    # The run's env (exported first in direct mode) may set XLA_FLAGS (LIBTPU_INIT_ARGS on
    # TPU): the flags add to it.
    var = record.get("flags_var") or "XLA_FLAGS"
    inherited = record["env"].get(var, env.get(var, ""))
    env.update(xla_env(inherited, record.get("xla_flags", []), var))
    cmd = (_player(records, record, scenario_path, state_dir, env)
           or _trainer(record, records, scenario_path, state_dir))
    launched = subprocess.run(["sh", "-c", _LAUNCH, "sh", str(err), *cmd], env=env,
                              capture_output=True, text=True, check=True,
                              start_new_session=True)
    pid = int(launched.stdout.strip())
    try:
        pgid: int | None = os.getpgid(pid)
    except ProcessLookupError:
        pgid = None
    record.update(state=STARTED, pid=pid, pgid=pgid, ticks=start_ticks(pid),
                  started_at=time.time())
    records.save(record)


def _trainer(record: dict[str, Any], records: JobRecords, scenario_path: Path,
             state_dir: Path) -> list[str]:
    """The trainer command line: it plans the job itself (and reports what it cannot)."""
    cmd = [sys.executable, "-m", "sweepd.sim", "train",
           "--scenario", str(scenario_path), "--model", record["model"],
           "--job-id", record["id"], "--job-name", record["job_name"],
           "--nodes", hostlist.collect_hostlist(record["nodes"]),
           "--all-ranks", "--log", record["log"], "--state-dir", str(state_dir),
           "--exit-file", str(records.exit_path(record["id"])),
           "--cluster-start", repr(records.cluster_start(record)),
           "--clock-file", str(records.clock_path(record["id"]))]
    if record["commit"]:
        cmd += ["--commit", record["commit"]]
    cmd += ["--", *record["passthrough"]]
    return cmd


def _player(records: JobRecords, record: dict[str, Any], scenario_path: Path,
            state_dir: Path, env: dict[str, str]) -> list[str] | None:
    """The job planned here, as the trainer would plan it in `env`, and a player of it: a
    trainer's start spends most of its CPU importing the scenario's models, and the tests
    start some thousand jobs. None when it cannot be planned here (a scenario that no
    longer loads, a malformed argument): the trainer then runs and says why, as before."""
    # The node order the trainer gets: its --nodes hostlist, expanded.
    nodes = hostlist.expand_hostlist(hostlist.collect_hostlist(record["nodes"]))
    meta = JobMeta(record["id"], record["job_name"], record["model"], tuple(nodes),
                   tuple(record["passthrough"]))
    log = Path(record["log"])
    path = records.jobs_dir / f"{record['id']}.plan"
    try:
        scenario = load_scenario(scenario_path)   # as the trainer would read it, now
        plan, meta = plan_command(scenario, state_dir, meta, record["commit"], env, log)
        atomic_write_json(path, job_file(to_json(plan), meta, log,
                                         scenario.cluster.time_scale,
                                         records.cluster_start(record),
                                         records.clock_path(record["id"]),
                                         records.exit_path(record["id"])))
    except Exception:   # whatever stops planning here, the trainer meets and reports
        return None
    return [sys.executable, "-m", "sweepd.sim.player", str(path)]


def arm_controller_down(scenario: Scenario, state_dir: Path, record: dict[str, Any]) -> None:
    """A controller_down fault starts its outage when the first job hitting it starts."""
    try:
        batch = true_outcome(scenario, record["model"], record["nodes"],
                             record["overrides"], record["env"], record["commit"]).batch
        fault = pick_fault(scenario, state_dir, record["id"], record["model"],
                           record["nodes"], batch, controller=True)
    except ValueError:       # an unknown model or bad override: the trainer reports it
        return
    if fault is not None and fault.seconds is not None:
        until = time.time() + fault.seconds * scenario.cluster.time_scale
        path = state_dir / CONTROLLER_DOWN
        atomic_write_json(path, max(until, float(read_json(path, 0.0))))
