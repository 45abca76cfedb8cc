"""Configs that run whole sweeps on the local real Slurm cluster with the simulated trainer
as the job payload (one process per rank under `srun -l`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from sweepd.config import Config, load_config
from tests.slurm_cluster import MAXTEXT_FIXTURE, slurm_dir

SIM = [sys.executable, "-m", "sweepd.sim"]
# Each job's log header and JOB SUMMARY block: the simulator's, printed without starting the
# simulator (tests/sim_log.py; a second or two less per job on a loaded machine).
HEADER = [sys.executable, str(Path(__file__).with_name("sim_log.py")), "header"]
SUMMARY = [sys.executable, str(Path(__file__).with_name("sim_log.py")), "summary"]
# Slurm time is wall time: the policy's durations are set for a fast simulated trainer.
FAST_POLICY = {"policy.hang_timeout_s": 20, "policy.poll_interval_s": 0.5,
               "policy.tail_backoff_max_s": 2, "policy.controller_down_limit_s": 900}


def fake_ssh(tmp_path: Path, scenario: Path) -> list[str]:
    """The nodes' shells: the local cluster's nodes are the scenario's, all on localhost,
    so the simulated cluster's fake ssh answers for them (dmesg, rocm-smi, ibstat)."""
    return [*SIM[:-1], "sweepd.sim.fake_ssh", "--scenario", str(scenario), "--state",
            str(tmp_path / "sim-state"), "{node}"]


def direct_config(tmp_path: Path, scenario: Path, **extra: Any) -> Config:
    state = tmp_path / "sim-state"
    return load_config(None, {
        "daemon.state_dir": str(tmp_path / "state"), "daemon.tick_s": 0.1,
        "cluster.backend": "slurm",
        "cluster.slurm": {
            "mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
            "train_command": [*SIM, "train", "--scenario", str(scenario),
                              "--state-dir", str(state)],
            "header_command": HEADER, "summary_command": SUMMARY,
        },
        "recovery.ssh": fake_ssh(tmp_path, scenario),
        **FAST_POLICY, **extra,
    })


def submit_sh_repo(tmp_path: Path, scenario: Path) -> Path:
    """A copy of the maxtext-slurm stand-in whose payload is the simulated trainer; a git
    repo root, as a person's checkout is (submit.sh snapshots the parent folder otherwise)."""
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    state = tmp_path / "sim-state"
    (repo / "train_cmd").write_text(
        " ".join([*SIM, "train", "--scenario", str(scenario), "--state-dir", str(state)]))
    return repo


def submit_sh_config(tmp_path: Path, scenario: Path, **extra: Any) -> Config:
    return load_config(None, {
        "daemon.state_dir": str(tmp_path / "state"), "daemon.tick_s": 0.1,
        "cluster.backend": "slurm",
        "cluster.slurm": {"mode": "submit_sh", "repo": str(submit_sh_repo(tmp_path, scenario)),
                          "slurm_conf": str(slurm_dir() / "slurm.conf")},
        "recovery.ssh": fake_ssh(tmp_path, scenario),
        **FAST_POLICY, **extra,
    })
