"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hostlist import expand_hostlist

from sweepd.clusters.base import (
    JobStatus,
    SchedulerState,
)
from sweepd.clusters.slurm import (
    SlurmCluster,
    token_of,
)
from sweepd.config import Config
from tests.simrun import NODES
from tests.slurm_cluster import (
    MAXTEXT_FIXTURE,
    cluster_env,
    slurm_dir,
)
from tests.slurm_sweep import FAST_POLICY, HEADER, SIM, SUMMARY, submit_sh_repo

# --- from test_slurm_backend ---

FAKE_TRAIN = [sys.executable, str(MAXTEXT_FIXTURE / "fake_train.py")]


@dataclass
class Settings:
    mode: str = "direct"
    repo: Path | None = None
    command_prefix: Sequence[str] = ()
    partition: str | None = None
    time_limit: str | None = "5"
    train_command: Sequence[str] = field(default_factory=lambda: list(FAKE_TRAIN))
    extra_sbatch: Sequence[str] = ()
    allow_resume: bool = False
    slurm_conf: Path | None = None


def make_cluster(env: dict[str, str], header_command: Sequence[str] | None = None,
                 summary_command: Sequence[str] | None = None, **kw: object) -> SlurmCluster:
    settings = Settings(slurm_conf=Path(env["SLURM_CONF"]), **kw)  # type: ignore[arg-type]
    return SlurmCluster(settings, header_command=header_command,
                        summary_command=summary_command)


def recording_prefix(tmp_path: Path, hide_squeue: bool = False) -> tuple[list[str], Path]:
    """A command prefix that logs every Slurm command (and can pretend squeue forgot all)."""
    log = tmp_path / "argv.log"
    script = tmp_path / "record.sh"
    hide = 'if [[ $1 == squeue ]]; then exit 0; fi\n' if hide_squeue else ""
    script.write_text(f'#!/bin/bash\necho "$*" >> {log}\n{hide}exec "$@"\n')
    script.chmod(0o755)
    return [str(script)], log


async def wait_state(cluster: SlurmCluster, job_id: str, want: set[SchedulerState],
                     limit_s: float = 40) -> JobStatus:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while True:
        status = (await cluster.poll([job_id]))[job_id]
        if status.state in want:
            return status
        assert loop.time() < deadline, f"job {job_id} stuck in {status}"
        await asyncio.sleep(0.3)


FINISHED = {s for s in SchedulerState if s.finished}



# --- from test_slurm_submit_sh ---

def toolkit(tmp_path: Path, name: str = "maxtext-slurm") -> Path:
    """A copy of the stand-in that is a repo root (a `.git` directory), as a clone is."""
    repo = tmp_path / name
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def sbatch_shim(tmp_path: Path, mode: str) -> dict[str, str]:
    """An `sbatch` ahead of the real one on PATH, making the submission's outcome unclear
    the ways a lossy link or a wrapper does."""
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("sbatch")
    actions = {
        # Submitted, but nothing printed: submit.sh cannot parse a job id and exits 0.
        "silent": f'{real} "$@" >/dev/null 2>&1',
        # Submitted and the id printed, then an error exit: submit.sh calls it a failure.
        "late-error": f'{real} "$@"; echo "sbatch: error: Socket closed" >&2; exit 1',
        # Submitted, then no answer: sweepd's timeout ends submit.sh.
        "hang": f'{real} "$@" >/dev/null 2>&1; sleep 30',
        # A retrying wrapper submitted twice and printed nothing.
        "twice": f'{real} "$@" >/dev/null 2>&1; {real} "$@" >/dev/null 2>&1',
    }
    (shim / "sbatch").write_text(f"#!/bin/bash\n{actions[mode]}\n")
    (shim / "sbatch").chmod(0o755)
    return {"PATH": f"{shim}:{os.environ['PATH']}"}


def fresh(token: str) -> str:
    """Tokens are unique per job (the queue remembers earlier test runs' jobs)."""
    return f"{token}-{secrets.token_hex(3)}"


async def token_jobs(slurm_env: dict[str, str], token: str) -> dict[str, str]:
    proc = await asyncio.create_subprocess_exec(
        "squeue", "-h", "-t", "all", "-o", "%i|%T|%j", env={**os.environ, **slurm_env},
        stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    rows = [line.split("|") for line in out.decode().splitlines()]
    return {r[0]: r[1] for r in rows if r[2].endswith(f"_env_SWEEPD_TOKEN_{token}")}



# --- from test_slurm_xla_crash ---

def _toml(value: Any) -> str:
    return json.dumps(value)  # strings, numbers and lists of strings read the same in TOML


def write_slurm_config(tmp_path: Path, mode: str, scenario_path: Path) -> Path:
    """The daemon's config file: the same settings as `tests/slurm_sweep.py`'s configs."""
    slurm: dict[str, Any] = {"mode": mode, "slurm_conf": str(slurm_dir() / "slurm.conf")}
    if mode == "direct":
        slurm.update(train_command=[*SIM, "train", "--scenario", str(scenario_path),
                                    "--state-dir", str(tmp_path / "sim-state")],
                     header_command=HEADER, summary_command=SUMMARY)
    else:
        repo = submit_sh_repo(tmp_path, scenario_path)
        cmd = (repo / "train_cmd").read_text()
        (repo / "train_cmd").write_text(f"bash {repo}/_train.sh {cmd}")
        slurm["repo"] = str(repo)
    policy = {k.split(".", 1)[1]: v for k, v in FAST_POLICY.items()}
    lines = ["[daemon]", f"state_dir = {_toml(str(tmp_path / 'state'))}",
             f"socket = {_toml(str(tmp_path / 'sweepd.sock'))}", "tick_s = 0.1", "",
             "[cluster]", 'backend = "slurm"', "", "[cluster.slurm]",
             *(f"{k} = {_toml(v)}" for k, v in slurm.items()), "", "[policy]",
             *(f"{k} = {_toml(v)}" for k, v in policy.items())]
    path = tmp_path / "sweepd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def slurm_jobs(within: str | None = None) -> list[tuple[int, str | None]]:
    """Every job the controller remembers (MinJobAge is an hour): (id, sweepd token).
    `within`: only jobs that ran on these nodes (or never ran): the cluster's own sanity
    job, when a test's cluster is checked again, runs on others."""
    done = subprocess.run(["squeue", "-t", "all", "-h", "-o", "%i|%N|%j|%k"], check=True,
                          env={**os.environ, **cluster_env()}, capture_output=True, text=True,
                          timeout=30)
    allowed = set(expand_hostlist(within)) if within else None
    out = []
    for line in done.stdout.splitlines():
        jid, nodes, name, comment = line.split("|", 3)
        ran = set(expand_hostlist(nodes.strip())) if nodes.strip() else set()
        if allowed is None or ran <= allowed:
            out.append((int(jid), token_of(name, comment)))
    return out



# --- from test_slurm_xla_sweep ---

SLOT = "chi[2880-2881]"


PAG = "xla_gpu_enable_pipelined_all_gather"


BAD = "xla_gpu_enable_async_all_gather"   # this image's XLA rejects it


SPEC: dict[str, Any] = {
    "kind": "xla-tuning", "model": "deepseek3-671b", "nodes": SLOT, "parallelism": "FSDP=2",
    "per_device_batch_size": 7, "catalog": "replace",
    # thorough: every profile runs before the winner rule (these tests check the wiring of
    # each kind of profile; the seed mode may stop on pag before nch8 is seeded).
    "stop": "thorough",
    "profiles": [{"name": "pag", "settings": {PAG: "true"}},
                 {"name": "nch8", "settings": {"NCCL_NCHANNELS_PER_NET_PEER": "8"}},
                 {"name": "bad", "settings": {BAD: "true"}}],
}


def scenario(tmp_path: Path, time_scale: float = 0.001,
             effects: dict[str, Any] | None = None, **changes: Any) -> Path:
    """Two nodes, one FSDP=2 cell: pipelined all-gather +8 %, 8 channels -1 % (unless the
    test gives its own effects and landscape changes)."""
    if effects is None:
        effects = {f"{PAG}=true": {"tgs": 1.08}, "NCCL_NCHANNELS_PER_NET_PEER=8": {"tgs": 0.99}}
    landscape = {"parallelism": "FSDP=2", "tags": ["default"], "base_tgs": {"default": 1000.0},
                 "noise": 0.004, "effects": effects, **changes}
    data = {"cluster": {"nodes": NODES, "gpu": "MI355X", "gpu_memory_gib": 288,
                        "time_scale": time_scale, "noise": 0.004, "seed": 5},
            "tuning": {"model": "deepseek3-671b", "landscapes": [landscape],
                       "per_device_batch_size": 7, "unknown_flags": [BAD]}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def through_train_sh(config: Config) -> Path:
    """The submit.sh repo's payload run through its `_train.sh`, as the real toolkit runs it."""
    repo = config.cluster.slurm.repo
    assert repo is not None
    cmd = (repo / "train_cmd").read_text()
    (repo / "train_cmd").write_text(f"bash {repo}/_train.sh {cmd}")
    return repo


def neutral(i: int) -> dict[str, Any]:
    """A profile the landscape does not know: it changes nothing (a neutral NCCL knob)."""
    return {"name": f"n{i:02d}", "settings": {f"NCCL_KNOB_{i:02d}": "1"}}

