"""A clock the test moves by hand (cluster time that passes only when told)."""

from __future__ import annotations

from sweepd.util.clock import Clock


class HandClock(Clock):
    def __init__(self, t: float = 0.0) -> None:
        super().__init__()
        self.t = t

    def now(self) -> float:
        return self.t
