"""A kill -9 while `sbatch` is in flight, and a restart at once, never submits a job twice
nor leaves one untracked (real Slurm). Every `sbatch` goes through a wrapper that sleeps
1.2 s first, as an ssh `command_prefix` or a busy controller would; the daemon is killed
inside that window 20 times and started again at once; then the queue (squeue --states=all)
must hold exactly one job per token, each the one the store follows."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.daemon_proc import Daemon
from tests.slurm_cluster import cluster_env, slurm_dir

pytestmark = pytest.mark.slurm

KILLS = 20
NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881]"
SWEEPS = 3   # node-perf: 8 one-node jobs each, all submitted at once: 24 slow sbatch calls
# The wrapper's pause before `sbatch` runs, and the latest a kill lands after the pause
# began: the daemon submits one job at a time, so every pause is waited out in turn; the
# margin between the two covers the test noticing the pause (polled every 0.05 s).
SBATCH_DELAY_S = 1.2
KILL_BY_S = 0.95


def _slow_sbatch(tmp_path: Path) -> tuple[Path, Path]:
    """A command prefix: `sbatch` starts SBATCH_DELAY_S late; each start and end is logged
    with the daemon's pid (the wrapper's parent)."""
    trail = tmp_path / "sbatch.trail"
    wrapper = tmp_path / "slow-sbatch"
    wrapper.write_text(
        "#!/bin/sh\n"
        '[ "$1" = sbatch ] || exec "$@"\n'
        f'echo "start $PPID $$" >> "{trail}"\n'
        f"sleep {SBATCH_DELAY_S}\n"
        f'echo "exec $PPID $$" >> "{trail}"\n'
        '"$@"\nrc=$?\n'
        f'echo "end $PPID $$" >> "{trail}"\n'
        "exit $rc\n")
    wrapper.chmod(0o755)
    return wrapper, trail


def _toml(tmp_path: Path, wrapper: Path) -> Path:
    slurm = {"mode": "direct", "slurm_conf": str(slurm_dir() / "slurm.conf"),
             "command_prefix": [str(wrapper)],
             # No payload to speak of: the jobs only have to exist (cancelled at the end).
             "train_command": ["sh", "-c", "echo started; sleep 600", "train"]}
    lines = ["[daemon]", f'state_dir = "{tmp_path / "state"}"',
             f'socket = "{tmp_path / "sweepd.sock"}"', "tick_s = 0.05", "",
             "[cluster]", 'backend = "slurm"', "", "[cluster.slurm]",
             *(f"{k} = {json.dumps(v)}" for k, v in slurm.items()), "",
             "[policy]", "poll_interval_s = 0.5", "hang_timeout_s = 3600"]
    path = tmp_path / "sweepd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _trail(path: Path) -> list[tuple[str, int, int]]:
    if not path.exists():
        return []
    return [(w[0], int(w[1]), int(w[2])) for w in
            (line.split() for line in path.read_text().splitlines()) if len(w) == 3]


def _wait(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _restart(daemon: Daemon) -> int:
    daemon.start_detached()
    assert daemon.proc is not None
    return daemon.proc.pid


def _rows(db: Path) -> list[tuple[str, str | None, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT token, backend_id, state FROM jobs").fetchall()
    finally:
        conn.close()


def _queue() -> dict[str, list[str]]:
    """Token -> ids of every job Slurm knows (finished ones included) carrying it."""
    out = subprocess.run(["squeue", "--noheader", "--states=all", "-O",
                          "JobID:|,Comment:1000|,Name:"], env={**os.environ, **cluster_env()},
                         check=True, capture_output=True, text=True, timeout=30).stdout
    found: dict[str, list[str]] = defaultdict(list)
    for line in out.splitlines():
        job_id, comment, _ = (p.strip() for p in line.split("|", 2))
        if comment.startswith("sweepd:"):
            found[comment.removeprefix("sweepd:")].append(job_id)
    return found


def _settled(db: Path, trail: Path) -> bool:
    marks = _trail(trail)
    started = {pid for kind, _, pid in marks if kind == "start"}
    ended = {pid for kind, _, pid in marks if kind == "end"}
    rows = _rows(db)
    return (started == ended and len(rows) >= 8 * SWEEPS
            and all(state != "submitting" for _, _, state in rows))


# 20 daemon starts (each imports the whole daemon: seconds on a loaded 2-core machine) and
# 24 paused submissions one at a time: over the default 120 s there.
@pytest.mark.timeout(300)
def test_kill_during_slow_sbatch_submits_once_and_tracks_all(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    wrapper, trail = _slow_sbatch(tmp_path)
    daemon = Daemon(tmp_path, _toml(tmp_path, wrapper))
    db = tmp_path / "state" / "sweepd.db"
    rng = random.Random(20261201)
    in_flight_kills = 0
    try:
        client = daemon.start()
        for _ in range(SWEEPS):
            client.submit({"kind": "node-perf", "nodes": NODES})
        pid = daemon.proc.pid if daemon.proc else 0
        for _ in range(KILLS):
            # A submission of this daemon has started; kill it inside the wrapper's pause.
            _wait(lambda p=pid: any(k == "start" and pp == p for k, pp, _ in _trail(trail)),
                  "no sbatch started after the restart")
            time.sleep(rng.uniform(0.05, KILL_BY_S))
            daemon.stop(signal.SIGKILL)
            marks = _trail(trail)
            started = {w for k, pp, w in marks if k == "start" and pp == pid}
            execed = {w for k, pp, w in marks if k == "exec" and pp == pid}
            in_flight_kills += bool(started - execed)
            pid = _restart(daemon)
        _wait(lambda: _settled(db, trail), "the submissions did not settle", timeout=180)
        rows = _rows(db)
        queue = _queue()
    finally:
        daemon.kill()
        _cancel_all(db)
    assert in_flight_kills >= KILLS
    tokens = {token for token, _, _ in rows}
    twice = {t: ids for t, ids in queue.items() if t in tokens and len(ids) > 1}
    assert not twice, f"submitted twice: {twice}"
    tracked = {backend_id for _, backend_id, _ in rows}
    untracked = [ids for t, ids in queue.items() if t in tokens and ids[0] not in tracked]
    assert not untracked, f"untracked: {untracked}"
    assert all(queue.get(t) == [b] for t, b, _ in rows), (rows, queue)
    ran = sum(1 for kind, _, _ in _trail(trail) if kind == "exec")
    assert ran == len(rows), "one sbatch per job row"


def _cancel_all(db: Path) -> None:
    """Free the nodes for the next test: every job of this test's store."""
    if not db.exists():
        return
    ids = [b for _, b, _ in _rows(db) if b]
    stray = [i for t, found in _queue().items() for i in found
             if t in {token for token, _, _ in _rows(db)}]
    if ids or stray:
        subprocess.run(["scancel", *sorted(set(ids + stray))],
                       env={**os.environ, **cluster_env()}, check=False, timeout=30)
