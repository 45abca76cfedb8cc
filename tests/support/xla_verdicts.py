"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import (
    Verdict,
    VerdictKind,
    plan,
)

# --- from test_xla_tuning_verdicts ---

EV = Evidence(((Cost.ALL_GATHER, 0.4), (Cost.COMPUTE, 0.5)), "job 1002 HLO")


H8 = 8 * 3600.0


def _inputs(land: Landscape, **kw: object) -> Inputs:
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                  **kw)  # type: ignore[arg-type]


def _ok(profile: str, tgs: float, wave: int = 2, tag: str = "sparse",
        queue_s: float = 600.0) -> Result:
    return Result(profile, tag, Outcome.OK, tgs, 28.0, queue_s=queue_s, wave=wave)


def _base(n: int = 3, queue_s: float = 600.0) -> list[Result]:
    return ([_ok("baseline", 1000.0, 1, queue_s=queue_s) for _ in range(n)]
            + [_ok("baseline", 1000.0, 1, "dense"), _ok("evidence", 990.0, 1)])


def _timeboxed(results: list[Result], inp: Inputs | None = None) -> Verdict:
    # The baseline read by its mean: the last run spends the whole 8 h at once, a clock on
    # which the drift prior would make every claim hours away from its baseline (the
    # trend's reading on a sweep's clock: tests/test_xla_drift.py).
    inp = inp or _inputs(fsdp8(), drift=DriftRead.MEAN)
    results = [*results, _ok("lhs", 1000.0, 5, queue_s=H8)]
    v = plan(inp, results, EV)
    assert isinstance(v, Verdict) and v.kind is VerdictKind.TIMEBOX, v
    return v

