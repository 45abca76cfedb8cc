"""The README's "First real cluster" walk-through, step by step as a person runs it, in
submit.sh mode against the local Slurm cluster with a stand-in of the toolkit (its payload
the simulated trainer): `sweepd init` writes a personal config, `sweepd check` passes
every check (the scheduler, the repo root, the image, a dry job's log, a test message to
the chat), a personal daemon serves on the user's own socket, and a sweep submitted with
`--follow` reaches its verdict."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from sweepd.config import load_config
from tests.daemon_proc import Daemon
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import write_scenario
from tests.slurm_cluster import slurm_dir
from tests.slurm_sweep import submit_sh_repo
from tests.telegram_double import TOKEN, BotApiDouble

pytestmark = pytest.mark.slurm


async def sweepd(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sweepd", *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.timeout(600)
async def test_the_readme_steps_on_the_local_slurm_cluster_in_submit_sh_mode(
        tmp_path: Path, slurm_env: dict[str, str], double: BotApiDouble) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TG_", "SWEEPD_"))}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_STATE_HOME": str(tmp_path / "st"),
            "XDG_RUNTIME_DIR": str(tmp_path / "rt")}
    repo = submit_sh_repo(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    (repo / "container_env.sh").write_text('DOCKER_IMAGE="/images/maxtext-rocm.tar"\n')
    # On this machine the image check is a test double that finds the image.
    seen = tmp_path / "image-asked"
    image_check = tmp_path / "image-check"
    image_check.write_text(f'#!/bin/sh\necho "$@" > {seen}\n'
                           '[ "$1" = /images/maxtext-rocm.tar ] && echo "-rw-r--r-- 1 $1"\n')
    image_check.chmod(0o755)

    # 1. sweepd init: a personal config, submit.sh mode.
    code, out, err = await sweepd(env, "init", "--backend", "slurm", "--mode", "submit_sh",
                                  "--repo", str(repo), "--slurm-conf",
                                  str(slurm_dir() / "slurm.conf"))
    assert code == 0, err
    path = tmp_path / "cfg" / "sweepd" / "sweepd.toml"
    assert f"wrote {path}" in out
    # 2. Edit it: the image check, Telegram (the double stands in for the Bot API, as
    # base_url does for a relay without direct internet) and, for a fast stand-in, the
    # polling period.
    token = tmp_path / "cfg" / "sweepd" / "telegram.token"
    token.write_text(f"BotToken {TOKEN}\nChatID 4242\n")
    token.chmod(0o600)
    text = path.read_text().replace(
        'mode = "submit_sh"\n',
        f'mode = "submit_sh"\nimage_check_command = ["{image_check}"]\n').replace(
        "[telegram]\nenabled = false\n",
        f'[telegram]\nenabled = true\ntoken_file = "{token}"\nbase_url = "{double.base_url}"\n')
    path.write_text(text + "\n[policy]\npoll_interval_s = 0.5\nhang_timeout_s = 20\n"
                    "tail_backoff_max_s = 2\n")
    config = load_config(path)
    assert config.daemon.state_dir == tmp_path / "st" / "sweepd"

    # 3. sweepd check: every line ok, a dry job on one node among them.
    code, out, err = await sweepd(env, "check", "--config", str(path), "--job", "llama2-70b",
                                  "--nodes", "chi2870", "--override", "steps=8")
    lines = out.splitlines()
    assert code == 0, (out, err)
    assert [line.split(" ", 1)[0] for line in lines] == ["ok"] * 7, out
    names = [line[5:].split(":", 1)[0] for line in lines]
    assert names == ["config", "state", "scheduler", "toolkit", "image", "dry job", "chat"]
    dry = next(line for line in lines if "dry job:" in line)
    assert "step line(s) with TGS" in dry and "summary SUCCESS" in dry
    assert seen.read_text().strip() == "/images/maxtext-rocm.tar"
    [said] = double.texts(4242)   # one message, to the configured chat
    check_golden(GOLDEN / "first_real_cluster" / "check_chat_message.txt", said + "\n")
    assert not config.daemon.state_dir.exists()   # check wrote no state

    # 4. A personal daemon on the user's own socket; the CLI finds it by SWEEPD_SOCKET.
    daemon = Daemon(tmp_path, path)
    daemon.socket = config.daemon.socket
    assert str(daemon.socket).startswith(str(tmp_path / "rt"))
    spec = tmp_path / "sweep.yaml"
    spec.write_text("kind: model-perf\nmodel: llama2-70b\nnodes: chi2870\nvalues: [4, 6]\n")
    try:
        daemon.start()
        code, out, err = await sweepd({**env, "SWEEPD_SOCKET": str(daemon.socket)},
                                      "submit", str(spec), "--follow")
        assert code == 0, (out, err)
        assert "per_device_batch_size" in out
    finally:
        assert daemon.stop(signal.SIGTERM) == 0
        daemon.kill()
    assert any("llama2-70b" in t for t in double.texts(4242)[1:])   # results reached the chat
