"""A new user's first session on the local Slurm cluster, with nothing exported: `init` →
`check` → `validate` → `serve` → `submit --follow` → `report` → `stop`, every verb finding
the personal config `init` wrote (and the daemon's socket in it) by itself. HOME is a fresh
temporary directory and no XDG_* or SWEEPD_* variable is set, as in a new login shell."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweepd.config import load_config
from tests.simrun import write_scenario
from tests.slurm_cluster import slurm_dir
from tests.slurm_sweep import submit_sh_repo

pytestmark = pytest.mark.slurm


async def sweepd(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sweepd", *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def home() -> Iterator[Path]:
    # Short: the socket init puts under it must fit a Unix socket's 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(600)
async def test_a_new_users_path_needs_no_flag_and_no_variable(
        tmp_path: Path, home: Path, slurm_env: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TG_", "SWEEPD_", "XDG_"))} | {"HOME": str(home)}
    repo = submit_sh_repo(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    image = tmp_path / "maxtext.tar"
    image.write_text("an image\n")
    (repo / "container_env.sh").write_text(f'DOCKER_IMAGE="{image}"\n')

    code, out, err = await sweepd(env, "init", "--backend", "slurm", "--repo", str(repo),
                                  "--slurm-conf", str(slurm_dir() / "slurm.conf"))
    assert code == 0, err
    path = home / ".config" / "sweepd" / "sweepd.toml"
    assert f"wrote {path}" in out and "SWEEPD_SOCKET" not in out
    # Only the polling cadence is changed, for a fast stand-in of the toolkit.
    path.write_text(path.read_text() + "\n[policy]\npoll_interval_s = 0.5\n"
                    "hang_timeout_s = 20\ntail_backoff_max_s = 2\n")
    config = load_config(path)
    assert str(config.daemon.socket).startswith(str(home))

    code, out, err = await sweepd(env, "check")
    assert code == 0, (out, err)
    assert out.splitlines()[0] == f"ok   config: {path}"

    spec = tmp_path / "sweep.yaml"
    spec.write_text("kind: model-perf\nmodel: llama2-70b\nnodes: chi2870\nvalues: [4, 6]\n")
    code, out, err = await sweepd(env, "validate", str(spec))
    assert code == 0, (out, err)
    assert "(cluster backend: slurm, config " + str(path) in out.splitlines()[0]

    with (tmp_path / "serve.log").open("wb") as log:
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sweepd", "serve", env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(300):
            if config.daemon.socket.exists() or serve.returncode is not None:
                break
            await asyncio.sleep(0.1)
        assert config.daemon.socket.exists(), (tmp_path / "serve.log").read_text()[-2000:]
        code, out, err = await sweepd(env, "submit", str(spec), "--follow")
        assert code == 0, (out, err)
        assert "per_device_batch_size" in out
        code, out, err = await sweepd(env, "report", "1")
        assert code == 0, err
        assert "llama2-70b" in out
        code, out, err = await sweepd(env, "list")
        assert code == 0 and out.splitlines()[1].split()[:2] == ["1", "done"], (out, err)
        code, out, err = await sweepd(env, "stop")   # over the socket init's config names
        assert code == 0 and out.strip() == f"sweepd stopped (was on {config.daemon.socket})"
        assert await asyncio.wait_for(serve.wait(), 60) == 0   # a clean exit
    finally:
        if serve.returncode is None:   # the test failed before `stop`
            serve.terminate()
            await asyncio.wait_for(serve.wait(), 60)
