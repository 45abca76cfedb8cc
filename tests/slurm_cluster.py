"""The local real Slurm cluster (scripts/slurm-cluster.sh) as pytest fixtures.

`slurm_env` is session-scoped: it starts the cluster if `check` fails and fails the test,
never skips it, when the cluster cannot run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"
MAXTEXT_FIXTURE = ROOT / "tests" / "fixtures" / "maxtext"


def slurm_dir() -> Path:
    return Path(os.environ.get("SWEEPD_SLURM_DIR", "/tmp/sweepd-slurm"))


def cluster_env() -> dict[str, str]:
    return {"SLURM_CONF": str(slurm_dir() / "slurm.conf")}


def run_cluster_script(verb: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLUSTER_SCRIPT), verb, "--dir", str(slurm_dir())],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, **cluster_env()},
    )


def ensure_cluster() -> dict[str, str]:
    """Env for Slurm client commands of a running, checked cluster; fails the test if not."""
    # The stand-in submit.sh pauses 3 s before its post-submit check, as the real one does;
    # tests shorten the pause (its test knob) unless they set it themselves.
    os.environ.setdefault("FAKE_SUBMIT_CHECK_DELAY_S", "0.2")
    check = run_cluster_script("check")
    if check.returncode == 0:
        return cluster_env()
    start = run_cluster_script("start")
    check = run_cluster_script("check") if start.returncode == 0 else check
    if start.returncode != 0 or check.returncode != 0:
        pytest.fail(
            "local Slurm cluster did not start:\n"
            f"start rc={start.returncode}\n{start.stdout}{start.stderr}\n"
            f"check rc={check.returncode}\n{check.stdout}{check.stderr}",
            pytrace=False,
        )
    return cluster_env()


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    return ensure_cluster()


async def stop_controller() -> None:
    """Stop slurmctld alone (a controller outage) and wait until its process is gone;
    `ensure_cluster()` or the `start` verb brings it back."""
    import asyncio
    import signal

    pid = int((slurm_dir() / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.1)
