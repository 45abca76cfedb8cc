"""Shared fixtures: a real SQLite store per test, and a guard against leaving loopback."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from sweepd.store.store import Store

# The shared fixtures (`api`, `daemon`) live in tests/support/service.py.
pytest_plugins = ["tests.slurm_cluster", "tests.telegram_fixtures", "tests.support.service"]

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("127."):
            raise AssertionError(f"test tried to reach {address}: only loopback is allowed")
    return _real_connect(self, address)


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Slurm tests stop a cluster's controller, drain its nodes and read its whole queue:
    under xdist (`--dist loadgroup`) those of one cluster run one at a time, on one worker.
    There are three local clusters (tests/slurm_cluster.py): each test file's Slurm tests go
    to one of three groups, balanced by their measured time, and xdist hands its largest
    groups (these three) to three workers first; the other tests fill in around them."""
    # Grouped in the xdist controller and in each worker alike (a worker's own options do
    # not say that it is one); outside a worker the groups change nothing (tests/slurm_cluster.py).
    if not config.pluginmanager.hasplugin("xdist"):
        return
    # Imported here: pytest_plugins loads (and assertion-rewrites) the module first.
    from tests.slurm_cluster import split_slurm_files

    slurm = [item for item in items if item.get_closest_marker("slurm")
             or "slurm_env" in getattr(item, "fixturenames", ())]
    group = split_slurm_files(sorted({item.path.name for item in slurm}))
    for item in slurm:
        item.add_marker(pytest.mark.xdist_group(group[item.path.name]))


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


@pytest.fixture(autouse=True)
def fresh_logging() -> Iterator[None]:
    """A test that runs the CLI in-process configures logging (level, stream) for the whole
    process: put the defaults back, so the next test's `capture_logs` sees every line."""
    yield
    structlog.reset_defaults()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "sweepd.db")
    yield s
    await s.close()
