"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from dataclasses import replace

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import CLAIM, SEARCH, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.search import profiles
from tests.support.xla_verdicts import _base, _ok

# --- from test_xla_tuning_bounded_question ---

def _inputs(**kw: object) -> Inputs:
    land = fsdp8()
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                  drift=DriftRead.MEAN, **kw)  # type: ignore[arg-type]


def _board(base_n: int = 3) -> tuple[list[Result], str]:
    """25 flat profiles over every mechanism and one at +2.6 % on its two fresh runs (five
    in all: the selecting run and two re-runs read higher): not significantly above +2 %
    at 0.8 % noise against three baseline runs."""
    table = profiles(_inputs())
    others = [p for p in table if "+" not in p and p not in (
        "baseline", "evidence", "restore_default", "lhs", "nbuf", "mem95")]
    flat = [_ok(p, 1000.0 + (i % 3)) for i, p in enumerate(["nbuf", "mem95", *others[:24]])]
    lead = others[24]
    runs = [replace(_ok(lead, tgs, 3), rule=SEARCH) for tgs in (1040.0, 1036.0, 1038.0)]
    fresh = [replace(_ok(lead, tgs, 4), rule=CLAIM) for tgs in (1025.0, 1027.0)]
    wave6 = [_ok(lead, 1010.0, 4, "dense")]  # no regression on the other tag
    return [*_base(base_n), *flat, *runs, *fresh, *wave6], lead

