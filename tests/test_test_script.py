"""`scripts/test.sh` stops the Slurm cluster it started (issue 23 item 8: it left it
running), keeps it with --keep-cluster, and leaves alone a cluster it did not start.

Run on a copy of the script in a scratch tree whose `slurm-cluster.sh`, `.venv/bin/*`,
`curl` and `systemd-analyze` are stand-ins that log their calls: no real cluster is touched
(the shared one keeps running)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "test.sh"


def _tree(tmp_path: Path, cluster_running: bool | tuple[int, ...], pytest_rc: int = 0
          ) -> tuple[Path, Path]:
    """`cluster_running`: all three clusters, none, or these (their numbers)."""
    running = ((1, 2, 3) if cluster_running is True else () if cluster_running is False
               else cluster_running)
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "test.sh")
    log = tmp_path / "calls.log"
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    stamp = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()[:16]
    bin_ = root / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (root / ".venv" / f".installed-test-{stamp}").touch()

    def stub(path: Path, body: str) -> None:
        path.write_text(f"#!/bin/sh\necho \"$(basename \"$0\") $*\" >> {log}\n{body}\n")
        path.chmod(0o755)

    up = " ".join(map(str, running))
    stub(root / "scripts" / "slurm-cluster.sh",
         f'if [ "$1" = status ]; then case " {up} " in *" $3 "*) exit 0 ;; esac; exit 1; fi\n'
         'exit 0')
    for name in ("python", "ruff", "mypy"):
        stub(bin_ / name, "exit 0")
    stub(bin_ / "pytest", f"exit {pytest_rc}")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("curl", "systemd-analyze", "g++"):
        stub(tools / name, "exit 0")
    return root, log


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> int:
    path = f"{root.parent / 'tools'}:{os.environ['PATH']}"
    done = subprocess.run(["bash", str(root / "scripts" / "test.sh"), *args],
                          env={**os.environ, "PATH": path, **(env or {})},
                          capture_output=True, text=True, timeout=60)
    return done.returncode


def _pytest_calls(log: Path) -> list[list[str]]:
    """Each pytest the script ran, as its words."""
    return [line.split() for line in log.read_text().splitlines() if line.startswith("pytest ")]


def _cluster_calls(log: Path) -> list[str]:
    """The script's calls in order, but for the clusters' `start`s (and `check`s), made at
    once: each run of them in a fixed order."""
    calls = [line.split(maxsplit=1)[1] for line in log.read_text().splitlines()
             if line.startswith("slurm-cluster.sh")]
    for verb in ("start", "check"):
        run = [f"{verb} --cluster {c}" for c in (1, 2, 3)]
        at = next((i for i, call in enumerate(calls) if call in run), None)
        if at is not None and sorted(calls[at:at + 3]) == run:
            calls[at:at + 3] = run
    return calls


# The three local clusters (the others on other ports: each a test worker's Slurm tests).
STARTED = ["missing", "install", *(f"status --cluster {c}" for c in (1, 2, 3)),
           *(f"start --cluster {c}" for c in (1, 2, 3)),
           *(f"check --cluster {c}" for c in (1, 2, 3))]
STOPPED = [f"stop --cluster {c}" for c in (1, 2, 3)]


@pytest.mark.parametrize("pytest_rc", [0, 1])
def test_the_cluster_it_started_is_stopped_at_the_end(tmp_path: Path, pytest_rc: int) -> None:
    root, log = _tree(tmp_path, cluster_running=False, pytest_rc=pytest_rc)
    assert _run(root, "-k", "x") == pytest_rc          # the tests' status is kept
    calls = _cluster_calls(log)
    assert calls[:len(STARTED)] == STARTED and sorted(calls[len(STARTED):]) == STOPPED
    assert _pytest_calls(log) == [["pytest", "-q", "-n", "6", "--dist", "loadgroup", "-k", "x"]]


def test_keep_cluster_leaves_it_running(tmp_path: Path) -> None:
    root, log = _tree(tmp_path, cluster_running=False)
    assert _run(root, "--keep-cluster") == 0
    assert _cluster_calls(log) == STARTED
    # The option is the script's, not pytest's.
    assert _pytest_calls(log) == [["pytest", "-q", "-n", "6", "--dist", "loadgroup"]]
    root, log = _tree(tmp_path / "env", cluster_running=False)
    assert _run(root, env={"SWEEPD_KEEP_CLUSTER": "1"}) == 0
    assert not set(STOPPED) & set(_cluster_calls(log))


def test_a_cluster_already_running_is_not_stopped(tmp_path: Path) -> None:
    root, log = _tree(tmp_path, cluster_running=True)
    assert _run(root) == 0
    assert _cluster_calls(log) == STARTED


def test_only_the_clusters_it_started_are_stopped(tmp_path: Path) -> None:
    # Cluster 1 was up (a test run's own `slurm_env` may start it): it stays up; 2 and 3
    # were started here, and go.
    root, log = _tree(tmp_path, cluster_running=(1,))
    assert _run(root) == 0
    calls = _cluster_calls(log)   # stopped at once: in either order
    assert calls[:len(STARTED)] == STARTED
    assert sorted(calls[len(STARTED):]) == ["stop --cluster 2", "stop --cluster 3"]
