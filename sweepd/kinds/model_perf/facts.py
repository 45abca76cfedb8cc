"""What the model perf planner reads from the store beyond the sweep's own runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweepd.kinds.model_perf.search import Probe


@dataclass(frozen=True)
class Prior:
    """The latest settled sweep of the same cell (model, node count, parameter, config)."""

    sweep: int
    peak: Any                 # the swept value it found best (a verdict's `best`)
    tgs: float | None
    max_fit: Any              # the largest value that ran
    oom: Any                  # the smallest value that ran out of memory, or None
    probes: tuple[Probe, ...]  # its runs, as this planner sees them


@dataclass(frozen=True)
class PerfFacts:
    prior: Prior | None = None
    # Param memory (GB) an earlier job of the same model on the same nodes printed
    # (`Memstats: After params initialized`): exact, where the estimate is a formula.
    param_gb: float | None = None
