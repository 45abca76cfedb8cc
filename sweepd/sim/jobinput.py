"""What a simulated job is planned from (its own module: `plan` and `signatures` both read it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sweepd.sim.scenario import FaultSpec, Scenario
from sweepd.sim.truth import Truth
from sweepd.sim.tuningjob import TuningRun


@dataclass(frozen=True)
class JobInput:
    scenario: Scenario
    model: str
    job_id: str
    nodes: tuple[str, ...]
    overrides: Mapping[str, str]
    truth: Truth | None             # None when the config could not be read
    fault: FaultSpec | None = None
    error: str | None = None        # a Python error raised at startup
    tuning: TuningRun | None = None  # set when the model follows the scenario's landscapes
