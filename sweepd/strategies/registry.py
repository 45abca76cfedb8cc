"""Each sweep kind: its spec, its planner, its report table, and how it treats node faults.

Kinds live in `sweepd/strategies/kinds/`, one module each exporting `KIND`; they are
discovered here, so adding a kind touches no shared file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepd.store.rows import Job, Run, Sweep
from sweepd.strategies.base import Plan, SweepContext

if TYPE_CHECKING:
    from sweepd.specs import SweepSpec
    from sweepd.store.store import Store

Planner = Callable[[Any, SweepContext], Plan]
Table = Callable[[Sweep, Sequence[Run], Sequence[Job]], str]
Rows = Callable[[Sweep, Sequence[Run], Sequence[Job]], list[dict[str, Any]]]
# Facts a planner needs from the store beyond the sweep's own runs (e.g. a prior sweep).
Gather = Callable[["Store", Any], Awaitable[dict[str, Any]]]


async def _nothing(store: Store, spec: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Kind:
    name: str
    spec: type[SweepSpec]
    plan: Planner
    table: Table
    rows: Rows
    # True: a hardware fault excludes the node and retries elsewhere (multi-node sweeps).
    # False: the node's own run records the fault (per-node sweeps judge nodes).
    exclude_on_fault: bool = True
    # True: a config error (every node fails the same way) stops the sweep. False: it is
    # the run's own result (a model sweep judges each model; all failing = commit broken).
    config_stops: bool = True
    gather: Gather = _nothing
    # The directory to submit a run from (e.g. a worktree of the run's commit); None: the
    # configured repo. Called before every submission; must be idempotent.
    workdir: Callable[[Any, dict[str, Any], Path], Awaitable[Path | None]] | None = None
    # Removes what `workdir` made, once the sweep has ended (done, failed or aborted);
    # returns what it removed. Takes the spec and the sweep's directory.
    release: Callable[[Any, Path], Awaitable[list[Path]]] | None = None
    # A PNG where a picture says more than the table (None: nothing to draw yet).
    plot: Callable[[Sweep, Sequence[Run], Sequence[Job]], bytes | None] | None = None


@cache
def kinds() -> dict[str, Kind]:
    import sweepd.strategies.kinds as package

    found: dict[str, Kind] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        kind = module.KIND
        found[kind.name] = kind
    return found


def kind_of(name: str) -> Kind:
    try:
        return kinds()[name]
    except KeyError:
        raise ValueError(f"unknown sweep kind {name!r}") from None
