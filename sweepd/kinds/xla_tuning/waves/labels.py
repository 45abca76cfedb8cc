"""A run's label, unique in the sweep, and the role it carries back to the run's results: a
label ending in CLAIM_MARK is a run made to measure a recipe's claim, one ending in
REPORT_MARK a run made after a proposal was decided, to report its gain."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.xla_tuning.evidence.results import (
    CLAIM_MARK,
    CLAIM_RULES,
    REPORT,
    REPORT_MARK,
    Result,
    with_roles,
)
from sweepd.kinds.xla_tuning.waves.planned import Planned
from sweepd.store.rows import Job, Run


def label(p: Planned, primary: str, taken: set[str]) -> str:
    """A run's label, unique in the sweep: the profile (and its tag when not the primary);
    a repeat is numbered (`fast #2`); a run made to measure a recipe's claim ends in
    CLAIM_MARK (`fast #3 (claim)`: the store keeps its role so). The params, not the
    label, say what ran."""
    base = p.profile.name if p.tag == primary else f"{p.profile.name}@{p.tag}"
    mark = CLAIM_MARK if p.rule in CLAIM_RULES else REPORT_MARK if p.rule == REPORT else ""
    n = 1
    name = base
    while name in taken or name + CLAIM_MARK in taken or name + REPORT_MARK in taken:
        n += 1
        name = f"{base} #{n}"
    return name + mark


def roles(results: Sequence[Result], runs: Sequence[Run], jobs: Sequence[Job]
          ) -> list[Result]:
    """The results with their role (claim run, report run or neither) from their run's
    label."""
    claim_runs = {r.id for r in runs if r.label.endswith(CLAIM_MARK)}
    report_runs = {r.id for r in runs if r.label.endswith(REPORT_MARK)}
    keys = {j.backend_id or f"#{j.id}" for j in jobs if j.run_id in claim_runs}
    reports = frozenset(j.backend_id or f"#{j.id}" for j in jobs if j.run_id in report_runs)
    return with_roles(results, keys, reports)
