"""Every way `sweepd serve` can be refused at start ends in one `sweepd: …` line and exit
2, and leaves nothing behind: config and environment problems (a Slurm mode missing its
key, Slurm's commands missing, no Slurm configuration, a config that is not UTF-8, a
toolkit repo that does not exist, an unusable token file, no state directory) are found
before anything is written. A controller that is configured but away is not one of them:
the daemon starts and waits, as for an outage.

None of these tests talks to the shared Slurm cluster: "no configuration" runs the client
with SLURM_CONF unset (and no /etc/slurm/slurm.conf), "away" points a copy of its
slurm.conf at a port nobody listens on.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sweepd.cli.main import main
from tests.daemon_proc import Daemon
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.slurm_cluster import MAXTEXT_FIXTURE, slurm_dir


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
          ) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`sweepd serve --config PATH` in this process (a start is refused before it serves),
    under `env` as the whole environment."""
    def run(config: Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        if env is not None:
            for key in list(os.environ):
                monkeypatch.delenv(key)
            for key, value in env.items():
                monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(["serve", "--config", str(config)])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["serve"], code, out, err)

    return run


def write(tmp_path: Path, body: str) -> Path:
    """A config whose state and socket are under tmp_path, plus `body`."""
    path = tmp_path / "sweepd.toml"
    path.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
                    f'socket = "{tmp_path / "run" / "sweepd.sock"}"\n\n{body}')
    return path


Serve = Callable[..., subprocess.CompletedProcess[str]]


def assert_refused(done: subprocess.CompletedProcess[str], tmp_path: Path, *words: str) -> str:
    """Exit 2, one `sweepd: ` line naming the problem, no traceback, nothing created."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("sweepd: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert not (tmp_path / "state").exists(), sorted(os.listdir(tmp_path / "state"))
    assert not (tmp_path / "run").exists()
    return lines[0]


def toolkit(tmp_path: Path) -> Path:
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def no_slurm_conf_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}


def test_slurm_backend_alone_names_the_missing_train_command(tmp_path: Path, serve: Serve) -> None:
    line = assert_refused(serve(write(tmp_path, '[cluster]\nbackend = "slurm"\n')), tmp_path,
                          "train_command", "submit_sh")
    assert "ValueError" not in line


def test_submit_sh_mode_without_repo_names_the_key(tmp_path: Path, serve: Serve) -> None:
    assert_refused(serve(write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                                         'mode = "submit_sh"\n')), tmp_path, "cluster.slurm.repo")


def test_slurm_commands_not_on_path(tmp_path: Path, serve: Serve) -> None:
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             'train_command = ["true"]\n')
    empty = tmp_path / "bin"
    empty.mkdir()
    line = assert_refused(serve(config, {**os.environ, "PATH": str(empty)}), tmp_path,
                          "not on PATH", "squeue")
    assert "FileNotFoundError" not in line


def test_submit_sh_mode_with_no_slurm_configuration(tmp_path: Path, serve: Serve) -> None:
    # Slurm's clients look for /etc/slurm/slurm.conf (then DNS) when SLURM_CONF is unset.
    assert not Path("/etc/slurm/slurm.conf").exists()
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             f'mode = "submit_sh"\nrepo = "{toolkit(tmp_path)}"\n')
    line = assert_refused(serve(config, no_slurm_conf_env()), tmp_path,
                          "configuration source", "SLURM_CONF")
    assert "SlurmCommandError" not in line


def test_a_slurm_conf_that_is_not_there(tmp_path: Path, serve: Serve) -> None:
    # Slurm's own clients would retry a missing slurm.conf for a minute first.
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             f'mode = "submit_sh"\nrepo = "{toolkit(tmp_path)}"\n')
    assert_refused(serve(config, {**no_slurm_conf_env(), "SLURM_CONF": str(tmp_path / "no")}),
                   tmp_path, "SLURM_CONF", "is not a file")


def test_a_config_that_is_not_utf8(tmp_path: Path, serve: Serve) -> None:
    config = tmp_path / "sweepd.toml"
    config.write_bytes(b'[daemon]\nstate_dir = "/tmp/\xff\xfe"\n')
    line = assert_refused(serve(config), tmp_path, "not UTF-8", str(config))
    assert "UnicodeDecodeError" not in line


def test_submit_sh_mode_with_a_repo_that_does_not_exist(tmp_path: Path, serve: Serve) -> None:
    missing = tmp_path / "nowhere" / "maxtext-slurm"
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             f'mode = "submit_sh"\nrepo = "{missing}"\n'
                             f'slurm_conf = "{slurm_dir() / "slurm.conf"}"\n')
    assert_refused(serve(config), tmp_path, str(missing), "does not exist")


def test_a_repo_without_submit_sh(tmp_path: Path, serve: Serve) -> None:
    repo = tmp_path / "empty-repo"
    repo.mkdir()
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             f'mode = "submit_sh"\nrepo = "{repo}"\n'
                             f'slurm_conf = "{slurm_dir() / "slurm.conf"}"\n')
    assert_refused(serve(config), tmp_path, "no submit.sh")


def test_a_missing_token_file(tmp_path: Path, serve: Serve) -> None:
    config = write(tmp_path, f'[telegram]\nenabled = true\ntoken_file = "{tmp_path / "tok"}"\n'
                             "chat_ids = [1]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TG_")}
    assert_refused(serve(config, env), tmp_path, "cannot read token file")


def test_a_token_file_others_can_read(tmp_path: Path, serve: Serve) -> None:
    token = tmp_path / "tok"
    token.write_text("123:abc\n")
    token.chmod(0o644)
    config = write(tmp_path, f'[telegram]\nenabled = true\ntoken_file = "{token}"\n'
                             "chat_ids = [1]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TG_")}
    line = assert_refused(serve(config, env), tmp_path, "chmod 600")
    assert "123:abc" not in line


def test_an_empty_config_creates_no_root_directories(tmp_path: Path, serve: Serve) -> None:
    # The defaults are the systemd unit's; a start outside it must not create them.
    defaults = [Path("/var/lib/sweepd"), Path("/run/sweepd")]
    assert not any(p.exists() for p in defaults)
    config = tmp_path / "empty.toml"
    config.write_text("")
    done = serve(config)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    check_golden(GOLDEN / "start_paths" / "no_state_dir.txt", f"{lines[0]}\n")
    assert not any(p.exists() for p in defaults)


def test_a_controller_away_is_waited_for_not_refused(tmp_path: Path) -> None:
    # A slurm.conf naming a controller port nobody listens on: configured, but away.
    away = tmp_path / "slurm.conf"
    away.write_text((slurm_dir() / "slurm.conf").read_text()
                    .replace("SlurmctldPort=16817", "SlurmctldPort=16899"))
    config = write(tmp_path, 'tick_s = 0.05\n[cluster]\nbackend = "slurm"\n'
                   f'[cluster.slurm]\nmode = "submit_sh"\nrepo = "{toolkit(tmp_path)}"\n'
                   f'slurm_conf = "{away}"\n')
    daemon = Daemon(tmp_path, config)
    daemon.socket = tmp_path / "run" / "sweepd.sock"
    try:
        client = daemon.start()
        status = client.status()
        assert status["backend_reachable"] is False, status
        assert "daemon.controller_away" in daemon.log.read_text()
    finally:
        assert daemon.stop(signal.SIGTERM) == 0
        daemon.kill()
    assert (tmp_path / "state" / "sweepd.db").exists()   # a started daemon keeps its state


def test_a_foreground_run_checks_slurm_first_too(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, '[cluster]\nbackend = "slurm"\n[cluster.slurm]\n'
                             'train_command = ["true"]\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text("kind: model-perf\nmodel: llama2-70b\nnodes: chi2832\nvalues: [4]\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    capsys.readouterr()
    code = main(["run", str(spec), "--config", str(config), "--state-dir",
                 str(tmp_path / "state")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    check_golden(GOLDEN / "start_paths" / "run_without_slurm.txt", scrubbed(f"{err[0]}\n",
                                                                           tmp=tmp_path))
    assert not (tmp_path / "state").exists()
