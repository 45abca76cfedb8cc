"""The socket's permissions and the peer-credential check (SO_PEERCRED)."""

from __future__ import annotations

import asyncio
import grp
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sweepd.api.server import start_server
from sweepd.app.service import Service
from sweepd.clusters.sim import SimCluster
from sweepd.config import ConfigError, load_config
from sweepd.core.engine import Engine
from sweepd.store.store import Store
from sweepd.util.clock import Clock
from tests.simrun import write_scenario

GROUP = "daemon"  # a group every Debian system has; the test user is made a member of it

@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Path]:
    # Outside pytest's private tmp tree, so that another user can reach the socket's directory.
    public = Path(tempfile.mkdtemp(prefix="sweepd-sock-"))
    public.chmod(0o755)
    store = await Store.open(tmp_path / "db.sqlite")
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state")})
    backend = SimCluster(tmp_path / "sim", write_scenario(tmp_path))
    service = Service(Engine(store, backend, Clock(1.0), config))
    sock = public / "run" / "sweepd.sock"
    runner = await start_server(service, sock, socket_group=GROUP)
    try:
        yield sock
    finally:
        await runner.cleanup()
        await backend.close()
        await store.close()
        shutil.rmtree(public, ignore_errors=True)


async def _ask_as(sock: Path, user: str, extra_groups: list[str] | None = None,
                  verbose: bool = False) -> str:
    """`curl --unix-socket` as another user: what a person on the login node would run
    (`verbose`: with curl's account of the connect, which names the errno)."""
    proc = await asyncio.create_subprocess_exec(
        "curl", "-sS", *(["-v"] if verbose else []), "--max-time", "10", "-w", "\n%{http_code}",
        "--unix-socket", str(sock),
        "http://sweepd/sweeps", user=user, extra_groups=extra_groups or [], cwd="/",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return out.decode()


async def test_socket_is_0660_group_owned_in_a_private_directory(served: Path) -> None:
    mode = os.stat(served)
    assert stat.S_IMODE(mode.st_mode) == 0o660
    assert mode.st_gid == grp.getgrnam(GROUP).gr_gid
    assert stat.S_IMODE(os.stat(served.parent).st_mode) == 0o750


async def test_a_stranger_cannot_connect(served: Path) -> None:
    # The server answers a member before and after: the stranger's failure is a refusal by
    # the live server's socket, not a dead server ("Couldn't connect" alone is both).
    assert (await _ask_as(served, "nobody", extra_groups=[GROUP])).endswith("200")
    out = await _ask_as(served, "nobody", verbose=True)
    assert f"connect fail for {served}: Permission denied" in out, out
    assert out.endswith("000") and "may not use sweepd" not in out, out
    assert (await _ask_as(served, "nobody", extra_groups=[GROUP])).endswith("200")


async def test_a_stranger_past_loose_permissions_gets_403(served: Path) -> None:
    os.chmod(served.parent, 0o755)
    os.chmod(served, 0o666)  # a misconfigured socket: the peer check still holds
    out = await _ask_as(served, "nobody")
    assert out.endswith("403") and "may not use sweepd" in out, out


async def test_a_member_of_the_socket_group_is_allowed(served: Path) -> None:
    out = await _ask_as(served, "nobody", extra_groups=[GROUP])
    assert out.endswith("200"), out


async def test_root_is_allowed(served: Path) -> None:
    out = await _ask_as(served, "root")
    assert out.endswith("200"), out


async def test_a_live_daemons_socket_is_not_stolen(served: Path, tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db2.sqlite")
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state2")})
    backend = SimCluster(tmp_path / "sim2", write_scenario(tmp_path))
    service = Service(Engine(store, backend, Clock(1.0), config))
    try:
        with pytest.raises(Exception, match=r"running|in use|another"):
            await start_server(service, served)
    finally:
        await backend.close()
        await store.close()


async def test_a_group_the_daemon_user_is_not_in_is_one_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root every chown succeeds, so the kernel's refusal to a plain user is stood in for."""
    def refuse(path: object, uid: int, gid: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    store = await Store.open(tmp_path / "db.sqlite")
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state")})
    backend = SimCluster(tmp_path / "sim", write_scenario(tmp_path))
    service = Service(Engine(store, backend, Clock(1.0), config))
    monkeypatch.setattr(os, "chown", refuse)
    sock = tmp_path / "run" / "sweepd.sock"
    try:
        with pytest.raises(ConfigError, match=f"cannot give the socket to group '{GROUP}': "
                                              "the daemon's user is not in it"):
            await start_server(service, sock, socket_group=GROUP)
        assert not sock.exists()   # nothing left behind for the next start to trip on
        with pytest.raises(ConfigError, match="socket group 'no-such-group' does not exist"):
            await start_server(service, sock, socket_group="no-such-group")
    finally:
        await backend.close()
        await store.close()
