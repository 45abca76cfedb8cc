"""The hang floor of a simulated cluster stretches with the machine's CPU crowding: a
simulated job's processes start on this machine, and a floor meant for a quiet machine
called a slow start under load a hang (a retried job, a different sweep)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sweepd.util import load
from tests.telegram_double import service_over


def _loadavg(monkeypatch: pytest.MonkeyPatch, value: float) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (value, value, value))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(load, "_last", (-10.0, 1.0))   # forget the last reading


def test_crowding_is_runnable_work_per_two_cores_at_least_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _loadavg(monkeypatch, 10.0)
    assert load.crowding() == 2.5
    _loadavg(monkeypatch, 4.0)       # a test run's usual load on 2 cores: the plain floor
    assert load.crowding() == 1.0
    _loadavg(monkeypatch, 0.3)
    assert load.crowding() == 1.0


async def test_the_hang_floor_stretches_with_the_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with service_over(tmp_path) as service:
        engine = service.engine
        engine.config.daemon.hang_floor_wall_s = 30.0
        floor = 30.0 / engine.clock.scale
        assert floor > engine.config.policy.hang_timeout_s   # the floor decides on a sim
        _loadavg(monkeypatch, 1.0)
        assert engine.hang_limit() == pytest.approx(floor)
        _loadavg(monkeypatch, 16.0)
        assert engine.hang_limit() == pytest.approx(4 * floor)
