"""How crowded this machine's CPUs are, for the wall-time floors of a simulated cluster.

A simulated job's processes start and print on this machine: with much more runnable work
than cores, their silences stretch by about the ratio, and a floor meant for a quiet
machine calls a slow start a hang. Up to twice the cores the floor already holds (every
test run at -n 4 on 2 cores is there, and a stretched floor would make each seeded hang
wait longer); past it the floor stretches.
"""

from __future__ import annotations

import os
import time

_READ_EVERY_S = 1.0
_last: tuple[float, float] = (-_READ_EVERY_S, 1.0)   # (monotonic time read, factor)


def crowding() -> float:
    """Runnable work per two cores over the last minute, at least 1 (read at most once a
    second: the hang check asks per job)."""
    global _last
    now = time.monotonic()
    if now - _last[0] >= _READ_EVERY_S:
        try:
            load = os.getloadavg()[0]
        except OSError:   # no load figure on this system: a quiet machine's floor
            load = 0.0
        _last = (now, max(1.0, load / (2 * (os.cpu_count() or 1))))
    return _last[1]
