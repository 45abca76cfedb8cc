"""Every verb finds the config `sweepd init` wrote, and the daemon's socket in it; `--config`,
$SWEEPD_CONFIG and $SWEEPD_SOCKET still override, in that order. Run as subprocesses with
a HOME of their own, as a person's shell is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden_files import GOLDEN, check_golden, scrubbed

EXAMPLE = Path(__file__).parent.parent / "examples" / "model-perf.yaml"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "h"
    home.mkdir()
    return {k: v for k, v in os.environ.items() if not k.startswith(("SWEEPD_", "XDG_"))} \
        | {"HOME": str(home)}


def sweepd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)


def config(path: Path, socket: Path) -> Path:
    path.write_text(f'[daemon]\nstate_dir = "{path.parent / "state"}"\n'
                    f'socket = "{socket}"\n')
    return path


def test_validate_and_the_client_verbs_find_inits_config_and_its_socket(
        env: dict[str, str], tmp_path: Path) -> None:
    assert sweepd(env, "init").returncode == 0
    personal = Path(env["HOME"]) / ".config" / "sweepd" / "sweepd.toml"
    socket = Path(env["HOME"]) / ".local" / "state" / "sweepd" / "sweepd.sock"
    done = sweepd(env, "validate", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    # The plan's line names the config init wrote (under HOME).
    assert str(personal) in done.stdout.splitlines()[0]
    check_golden(GOLDEN / "config_discovery" / "validate_inits_config.txt",
                 scrubbed(done.stdout.splitlines()[0] + "\n", home=env["HOME"]))
    # No daemon yet: the client verbs name the socket of the config init wrote.
    for verb in (["status"], ["list"], ["show", "1"]):
        done = sweepd(env, *verb)
        assert done.returncode == 1 and str(socket) in done.stderr, (verb, done.stderr)
    assert "ok   config: " + str(personal) in sweepd(env, "check").stdout


def test_config_and_env_override_the_found_config(env: dict[str, str], tmp_path: Path) -> None:
    assert sweepd(env, "init").returncode == 0
    other = config(tmp_path / "other.toml", tmp_path / "other.sock")
    named = config(tmp_path / "named.toml", tmp_path / "named.sock")
    env_named = env | {"SWEEPD_CONFIG": str(named)}
    assert sweepd(env_named, "validate", str(EXAMPLE)).stdout.splitlines()[0].endswith(
        f"config {named})")
    assert str(tmp_path / "named.sock") in sweepd(env_named, "status").stderr
    # --config over $SWEEPD_CONFIG; $SWEEPD_SOCKET and --socket over any config's socket.
    assert str(tmp_path / "other.sock") in sweepd(env_named, "status", "--config",
                                                  str(other)).stderr
    assert sweepd(env_named, "validate", str(EXAMPLE), "--config",
                  str(other)).stdout.splitlines()[0].endswith(f"config {other})")
    away = env_named | {"SWEEPD_SOCKET": str(tmp_path / "env.sock")}
    assert str(tmp_path / "env.sock") in sweepd(away, "status").stderr
    assert str(tmp_path / "flag.sock") in sweepd(away, "--socket", str(tmp_path / "flag.sock"),
                                                 "status").stderr


def test_no_config_anywhere_is_the_simulated_cluster_and_the_system_socket(
        env: dict[str, str]) -> None:
    done = sweepd(env, "validate", str(EXAMPLE))
    assert done.returncode == 0
    check_golden(GOLDEN / "config_discovery" / "validate_no_config.txt",
                 done.stdout.splitlines()[0] + "\n")
    assert "/run/sweepd/sweepd.sock" in sweepd(env, "status").stderr
    check = sweepd(env, "check")
    assert check.returncode == 1 and check.stdout.startswith("FAIL config: none found")
