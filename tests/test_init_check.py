"""`sweepd init` writes a personal config (state and socket under the user's own XDG
directories, nothing under /var/lib or /run, no root needed) that `serve` accepts; `sweepd
check` prints one ok/FAIL line per pre-flight check with the reason and exits 1 on a
failure. The passing checks against the local Slurm cluster are in
test_first_real_cluster.py (the README's walk-through)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

from sweepd.config import load_config
from tests.golden_files import GOLDEN, check_golden, scrubbed
from tests.slurm_cluster import MAXTEXT_FIXTURE, slurm_dir
from tests.support.service import sweepd, xdg_env
from tests.telegram_double import TOKEN, BotApiDouble


def test_init_writes_a_personal_config_under_the_users_own_dirs(tmp_path: Path) -> None:
    env = xdg_env(tmp_path)
    done = sweepd(env, "init")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "cfg" / "sweepd" / "sweepd.toml"
    # At the default place, every verb finds it: nothing to name or export.
    assert f"wrote {path}" in done.stdout and "next: sweepd check\n" in done.stdout
    config = load_config(path)
    assert config.daemon.state_dir == tmp_path / "st" / "sweepd"
    assert config.daemon.socket == tmp_path / "rt" / "sweepd" / "sweepd.sock"
    assert config.cluster.backend == "sim" and not config.telegram.enabled
    assert not config.daemon.state_dir.exists()   # serve makes it, init does not
    again = sweepd(env, "init")   # never overwritten unasked
    assert again.returncode == 2
    check_golden(GOLDEN / "init_check" / "init_refuses_to_overwrite.txt",
                 scrubbed(again.stderr, config=path))
    # The sim config passes its checks.
    checked = sweepd(env, "check")
    assert checked.returncode == 0, checked.stdout
    assert [line.split(" ", 1)[0] for line in checked.stdout.splitlines()] == ["ok"] * 5


def test_init_for_slurm_writes_the_mode_and_names_what_is_missing(tmp_path: Path) -> None:
    env = xdg_env(tmp_path)
    missing = sweepd(env, "init", "--backend", "slurm")   # submit_sh is the default mode
    assert missing.returncode == 2 and "--repo" in missing.stderr
    out = tmp_path / "direct.toml"
    done = sweepd(env, "init", "--backend", "slurm", "--mode", "direct", "--config", str(out),
                  "--train-command", "/opt/maxtext/train.sh --fast", "--gpus-per-node", "4")
    assert done.returncode == 0, done.stderr
    config = load_config(out)
    assert config.cluster.slurm.mode == "direct" and config.cluster.gpus_per_node == 4
    assert config.cluster.slurm.train_command == ["/opt/maxtext/train.sh", "--fast"]


def test_init_with_a_state_dir_puts_the_socket_under_it(tmp_path: Path) -> None:
    """Two configs of their own state dirs get two sockets: a second `serve` is not refused
    as "already serving", and `validate` asks its own daemon, not the other one."""
    env = xdg_env(tmp_path)
    for name in ("a", "b"):
        done = sweepd(env, "init", "--config", str(tmp_path / f"{name}.toml"),
                      "--state-dir", str(tmp_path / f"state-{name}"))
        assert done.returncode == 0, done.stderr
    a, b = (load_config(tmp_path / f"{n}.toml").daemon for n in ("a", "b"))
    assert a.socket == tmp_path / "state-a" / "sweepd.sock"
    assert b.socket == tmp_path / "state-b" / "sweepd.sock"
    named = sweepd(env, "init", "--config", str(tmp_path / "c.toml"), "--state-dir",
                   str(tmp_path / "state-c"), "--socket", str(tmp_path / "c.sock"))
    assert named.returncode == 0, named.stderr
    assert load_config(tmp_path / "c.toml").daemon.socket == tmp_path / "c.sock"


async def test_check_names_every_failure_in_one_line_each(
        tmp_path: Path, double: BotApiDouble) -> None:
    # Nothing here reaches the shared cluster: its slurm.conf is copied with a controller
    # port nobody listens on.
    away = tmp_path / "slurm.conf"
    away.write_text((slurm_dir() / "slurm.conf").read_text()
                    .replace("SlurmctldPort=16817", "SlurmctldPort=16899"))
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)    # no `git init`: not a repo root
    (repo / "container_env.sh").write_text('DOCKER_IMAGE="/images/maxtext.tar"\n')
    image_double = tmp_path / "image-check"
    image_double.write_text('#!/bin/sh\necho "ls: cannot access \'$1\': No such file" >&2\n'
                            "exit 2\n")
    image_double.chmod(0o755)
    token = tmp_path / "tg.token"
    token.write_text("BotToken 1:wrong\n")
    token.chmod(0o600)
    config = tmp_path / "sweepd.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "s.sock"}"\n'
        f'[cluster]\nbackend = "slurm"\n[cluster.slurm]\nmode = "submit_sh"\n'
        f'repo = "{repo}"\nslurm_conf = "{away}"\nimage_check_command = ["{image_double}"]\n'
        f'[telegram]\nenabled = true\ntoken_file = "{token}"\nchat_ids = [42]\n'
        f'base_url = "{double.base_url}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("TG_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sweepd", "check", "--config", str(config), "--job",
        "llama2-70b", "--nodes", "chi2870", env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    lines = out.decode().splitlines()
    assert proc.returncode == 1, (out, err)
    by_name = {line[5:].split(":", 1)[0]: line for line in lines}
    assert by_name["config"].startswith("ok")
    assert by_name["state"].startswith("ok")
    assert by_name["scheduler"].startswith("FAIL") and "does not answer" in by_name["scheduler"]
    assert by_name["toolkit"].startswith("FAIL") and "not a repo root" in by_name["toolkit"]
    assert by_name["image"].startswith("FAIL") and "No such file" in by_name["image"]
    check_golden(GOLDEN / "init_check" / "image_not_reachable.txt",
                 scrubbed(by_name["image"] + "\n", tmp=tmp_path))
    assert by_name["dry job"].startswith("FAIL") and "scheduler check failed" in \
        by_name["dry job"]
    assert by_name["chat"].startswith("FAIL") and "not delivered" in by_name["chat"]
    assert "1:wrong" not in out.decode() and double.texts() == []
    assert len(lines) == 7 and b"Traceback" not in err
    assert not (tmp_path / "state").exists()   # a check writes no state


@pytest.mark.parametrize("mode", ["0644"])
def test_check_refuses_an_unsafe_token_file_as_a_failed_line(tmp_path: Path, mode: str) -> None:
    token = tmp_path / "tg.token"
    token.write_text(f"BotToken {TOKEN}\n")
    token.chmod(int(mode, 8))
    config = tmp_path / "c.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\nsocket = '
                      f'"{tmp_path / "s.sock"}"\n[telegram]\nenabled = true\n'
                      f'token_file = "{token}"\nchat_ids = [42]\n')
    done = sweepd({k: v for k, v in os.environ.items() if not k.startswith("TG_")},
                  "check", "--config", str(config))
    assert done.returncode == 1
    chat = [line for line in done.stdout.splitlines() if " chat:" in line]
    assert chat and chat[0].startswith("FAIL chat:") and "chmod 600" in chat[0]
