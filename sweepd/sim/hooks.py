"""What a kind adds to the simulated cluster: its `kinds/<kind>/sim/hook.py` exports `HOOK`,
found by `kinds.modules.kind_modules` (as the registry finds kinds), so the simulator names
no kind.

A hook reads one top-level section of the scenario (validated with it, errors and all) and
may take over a job of a model that section names: it answers the job's truth, fault and
`KindJob` (what the timeline adds: environment lines, step noise, a dump file).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sweepd.kinds.modules import kind_modules
from sweepd.sim.jobinput import JobInput


@dataclass(frozen=True)
class JobPlace:
    """Where a job runs: the simulator's state directory, the `_env_K=V` passthrough, the
    job's own environment (None: os.environ) and its output directory."""

    state_dir: Path
    env: Mapping[str, str]
    process_env: Mapping[str, str] | None
    out_dir: Path | None


@dataclass(frozen=True)
class SimHook:
    section: str                              # the scenario's top-level key the kind reads
    spec: type[BaseModel]                     # that section's model
    models: Callable[[Any], Sequence[str]]    # the models a section names (checked as others)
    # The job as the kind models it (`base` has the resolved model and no truth yet), or
    # None: not the kind's job, the simulator's own truth decides.
    job: Callable[[JobInput, Any, JobPlace], JobInput | None]


@cache
def sim_hooks() -> tuple[SimHook, ...]:
    hooks = tuple(getattr(m, "HOOK", None) for m in kind_modules("sim.hook"))
    return tuple(h for h in hooks if isinstance(h, SimHook))
