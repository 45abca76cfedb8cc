"""Each sweep kind: its spec, its planner, its report table, and how it treats node faults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sweepd.reports import model_perf as model_perf_report
from sweepd.specs import ModelPerfSpec, SweepSpec
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.store import Store
from sweepd.strategies import perf_plan
from sweepd.strategies.base import Plan, SweepContext

Planner = Callable[[Any, SweepContext], Plan]
Table = Callable[[Sweep, Sequence[Run], Sequence[Job]], str]
Rows = Callable[[Sweep, Sequence[Run], Sequence[Job]], list[dict[str, Any]]]
# Facts a planner needs from the store beyond the sweep's own runs (e.g. a prior sweep).
Gather = Callable[[Store, Any], Awaitable[dict[str, Any]]]


async def _nothing(store: Store, spec: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Kind:
    spec: type[SweepSpec]
    plan: Planner
    table: Table
    rows: Rows
    # True: a hardware fault excludes the node and retries elsewhere (multi-node sweeps).
    # False: the node's own run records the fault (per-node sweeps judge nodes).
    exclude_on_fault: bool = True
    gather: Gather = _nothing


KINDS: dict[str, Kind] = {
    "model-perf": Kind(ModelPerfSpec, perf_plan.plan, model_perf_report.markdown,
                       model_perf_report.rows),
}


def kind_of(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown sweep kind {name!r}") from None
