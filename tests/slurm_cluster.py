"""The local real Slurm clusters (scripts/slurm-cluster.sh) as pytest fixtures.

There are three clusters, alike but for their directory and ports, so that three xdist
workers can each run Slurm tests: tests/conftest.py puts every Slurm test in the xdist group
of one of them ("slurm", "slurm2" or "slurm3"), and the autouse fixture below points
`slurm_dir()` at that group's cluster for the test. Without xdist every test uses cluster 1
(`SWEEPD_SLURM_CLUSTER=2` or `3` picks another).

`slurm_env` starts the test's cluster if `check` fails (once per cluster and session) and
fails the test, never skips it, when the cluster cannot run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"
MAXTEXT_FIXTURE = ROOT / "tests" / "fixtures" / "maxtext"


# xdist group -> cluster number (scripts/slurm-cluster.sh --cluster N).
GROUPS = {"slurm": 1, "slurm2": 2, "slurm3": 3}
_current = int(os.environ.get("SWEEPD_SLURM_CLUSTER", "1"))
_checked: set[int] = set()


def slurm_dir() -> Path:
    """The directory of the cluster the running test uses."""
    if _current in (2, 3):
        return Path(os.environ.get(f"SWEEPD_SLURM{_current}_DIR", f"/tmp/sweepd-slurm{_current}"))
    return Path(os.environ.get("SWEEPD_SLURM_DIR", "/tmp/sweepd-slurm"))


# Seconds each file's Slurm tests took (each test's setup + call + teardown summed per file:
# the mean of two whole `scripts/test.sh --junitxml` runs on the 2-core machine, its Slurm
# tests on two clusters; a file's time varies by up to half between runs). A file not
# listed counts as SLURM_S_UNKNOWN
# (tests/test_slurm_groups.py fails on it). Only the balance between the groups depends
# on these.
SLURM_S = {
    "test_slurm_xla_sweep.py": 214,
    "test_slurm_campaign_crash.py": 169,
    "test_slurm_xla_crash.py": 127,
    "test_slurm_faults.py": 119,
    "test_slurm_crash.py": 77,
    "test_slurm_submit_crash.py": 62,
    "test_slurm_cancel_log.py": 62,
    "test_slurm_kinds.py": 55,
    "test_slurm_cadence.py": 36,
    "test_slurm_sweeps.py": 34,
    "test_first_real_cluster.py": 27,
    "test_new_user_path.py": 27,
    "test_slurm_submit_sh.py": 25,
    "test_slurm_backend.py": 21,
    "test_slurm_environment.py": 5,
    "test_backend_contract.py": 12,
    "test_job_times.py": 21,
    "test_slurm_queued_dead.py": 15,
    "test_slurm_xla.py": 10,
    "test_slurm_profiles_cleanup.py": 80,
    "test_slurm_partition.py": 10,
    "test_cli_views.py": 9,
    "test_repo_models.py": 3,
    "test_smaller_refusals.py": 2,
    "test_slurm_duplicates.py": 2,
    "test_slurm_carry.py": 2,
    "test_xla_tuning_preflight.py": 1,
    "test_train_env.py": 1,
    "test_xla_tuning_plumbing.py": 1,
}
SLURM_S_UNKNOWN = 30.0


def split_slurm_files(files: list[str]) -> dict[str, str]:
    """File -> xdist group ("slurm", "slurm2" or "slurm3"): the longest first, each to the
    group with the least time so far, so the clusters' workers finish their Slurm tests
    together."""
    load = dict.fromkeys(GROUPS, 0.0)
    out: dict[str, str] = {}
    for name in sorted(files, key=lambda f: (-SLURM_S.get(f, SLURM_S_UNKNOWN), f)):
        group = min(load, key=lambda g: (load[g], g))
        out[name] = group
        load[group] += SLURM_S.get(name, SLURM_S_UNKNOWN)
    return out


@pytest.fixture(autouse=True)
def slurm_cluster_of_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """In an xdist worker, the cluster of the test's group; elsewhere the default one."""
    global _current
    marker = request.node.get_closest_marker("xdist_group")
    group = (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
    before = _current
    if os.environ.get("PYTEST_XDIST_WORKER") and group in GROUPS:
        _current = GROUPS[group]
    yield
    _current = before


def cluster_env() -> dict[str, str]:
    return {"SLURM_CONF": str(slurm_dir() / "slurm.conf")}


def run_cluster_script(verb: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLUSTER_SCRIPT), verb, "--cluster", str(_current), "--dir", str(slurm_dir())],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, **cluster_env()},
    )


def _controller_answers() -> bool:
    """A checked cluster whose controller a failed test left down is started again: one
    failure does not fail every later test of its cluster."""
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30,
                          check=False, env={**os.environ, **cluster_env()})
    return ping.returncode == 0


def ensure_cluster() -> dict[str, str]:
    """Env for Slurm client commands of a running, checked cluster; fails the test if not."""
    # The stand-in submit.sh pauses 3 s before its post-submit check, as the real one does;
    # tests shorten the pause (its test knob) unless they set it themselves.
    os.environ.setdefault("FAKE_SUBMIT_CHECK_DELAY_S", "0.2")
    if _current in _checked and _controller_answers():
        return cluster_env()
    check = run_cluster_script("check")
    if check.returncode == 0:
        _checked.add(_current)
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
    _checked.add(_current)
    return cluster_env()


@pytest.fixture
def slurm_env() -> dict[str, str]:
    """Env for the Slurm client commands of this test's cluster, running and checked."""
    return ensure_cluster()


async def stop_controller() -> None:
    """Stop slurmctld alone (a controller outage) and wait until its process is gone;
    `ensure_cluster()` or the `start` verb brings it back."""
    import asyncio
    import signal

    pid = int((slurm_dir() / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    # Its shutdown saves state and waits for its threads: ~2 s here, longer on a busy machine.
    # One that outlives a minute is killed; none is left to answer when the test says it
    # is down, or to keep `start` from starting another.
    for tick in range(700):
        try:
            os.kill(pid, signal.SIGKILL if tick == 600 else 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"slurmctld (pid {pid}) is still running 70 s after SIGTERM and SIGKILL")
