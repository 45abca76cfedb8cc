"""What a simulated job is planned from (its own module: `plan` and `signatures` both read it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sweepd.sim.scenario import FaultSpec, Scenario
from sweepd.sim.truth import Truth


class KindJob(Protocol):
    """What a kind's own model of its jobs adds to a simulated job (the kind's `sim/hook.py`
    builds it; e.g. an XLA tuning job's flags, step noise and HLO dump): the simulator asks,
    it does not know the kind."""

    def env_lines(self, rank: int) -> Sequence[str]:
        """What the rank prints of its environment before JAX starts."""
        ...

    def jitter(self, steps: int, profiling: bool, seed: str) -> list[float] | None:
        """Per-step relative TGS deviations (None: the cluster's own noise)."""
        ...

    def dump(self, nodes: int, layers: int, step_s: float | None) -> tuple[Path, str] | None:
        """A file rank 0 writes after compilation, and its text (None: none)."""
        ...

    def unknown_flag(self, flag: str) -> tuple[list[str], int] | None:
        """The lines every rank prints on an unknown flag, and the exit code (None: the
        simulator's own)."""
        ...


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
    kind_job: KindJob | None = None  # set when a kind's sim hook models the job
