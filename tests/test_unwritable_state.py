"""A state directory that cannot be written is one line from `serve` and `run` (exit 2,
nothing written), and a FAIL line from `sweepd check`, before any start: not a traceback
from opening the store after `init` and `check` said ok.

Root writes anywhere, so the real failures are made honestly: a state directory under a
regular file (any user), and a read-only file system mounted over the state directory in a
user and mount namespace of its own (`unshare -rm`;
the test fails, never skips, where the kernel refuses)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from sweepd.app.check import Line
from tests.support.service import xdg_env

ROOT = Path(__file__).parents[1]
SPEC = "kind: model-perf\nmodel: llama2-70b\nnodes: gpu[01-02]\nvalues: [4]\n"


def _files(tmp_path: Path, state: Path) -> tuple[Path, Path]:
    config = tmp_path / "c.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\nsocket = "{tmp_path / "s.sock"}"\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    return config, spec


def _sweepd(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**xdg_env(tmp_path), "PYTHONPATH": str(ROOT)})


def _one_line(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"sweepd: daemon.state_dir: {text}"], \
        done.stderr


def test_a_state_dir_under_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory\n")
    state = tmp_path / "afile" / "state"
    config, spec = _files(tmp_path, state)
    want = f"{state} cannot be made: {tmp_path / 'afile'} is not a directory"
    _one_line(_sweepd(tmp_path, "run", "--config", str(config), "--state-dir", str(state),
                      str(spec)), want)
    _one_line(_sweepd(tmp_path, "serve", "--config", str(config)), want)
    checked = _sweepd(tmp_path, "check", "--config", str(config))
    assert checked.returncode == 1
    assert str(Line("state", False, f"daemon.state_dir: {want}")) in checked.stdout.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "c.toml", "spec.yaml"]


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-rm", "sh", "-c",
                           f"mount -t tmpfs -o ro tmpfs {probe} && ! touch {probe}/x"],
                          capture_output=True, timeout=30, check=False)
    probe.rmdir()
    return done.returncode == 0


def test_a_read_only_state_dir_is_one_line_and_a_failed_check(tmp_path: Path) -> None:
    # Never skipped: CI runs as root on a kernel with mount namespaces, as this machine does.
    assert _can_mount_read_only(tmp_path), "no mount namespace (unshare -rm) for a read-only mount"
    state = tmp_path / "state"
    state.mkdir()
    config, spec = _files(tmp_path, state)
    # Run inside a namespace of its own with a read-only tmpfs over the state directory.
    ro = f"mount -t tmpfs -o ro tmpfs {shlex.quote(str(state))} && "

    def inside(*args: str) -> subprocess.CompletedProcess[str]:
        line = shlex.join([sys.executable, "-m", "sweepd", *args])
        return subprocess.run(["unshare", "-rm", "sh", "-c", f"{ro}exec {line}"],
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**xdg_env(tmp_path), "PYTHONPATH": str(ROOT)})

    want = f"{state} cannot be written (Read-only file system)"
    _one_line(inside("serve", "--config", str(config)), want)
    _one_line(inside("run", "--config", str(config), "--state-dir", str(state), str(spec)),
              want)
    _one_line(inside("run", "--config", str(config), "--state-dir", str(state / "new"),
                     str(spec)),
              f"{state / 'new'} cannot be made in {state} (Read-only file system)")
    checked = inside("check", "--config", str(config))
    assert checked.returncode == 1, checked.stdout
    assert str(Line("state", False, f"daemon.state_dir: {want}")) in checked.stdout.splitlines()
    assert os.listdir(state) == []
