"""What the wave planner is given: the spec's inputs and its thresholds (SKILL.md defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog import Parallelism, Profile, Setting


@dataclass(frozen=True)
class Inputs:
    parallelism: Parallelism
    catalog: tuple[Profile, ...]
    tags: tuple[str, ...] = ("default",)  # the first is the primary config tag
    deployed: tuple[Setting, ...] = ()  # what the model's env file sets (the Inventory)
    win: float = 0.05  # stop rule 1: a confirmed recipe at least this much faster
    bounded_gain: float = 0.02  # stop rule 2: none of >= bounded_count profiles beats this
    bounded_count: int = 25
    regress: float = 0.01  # no other config tag may lose more than this
    max_queue_s: float = 8 * 3600.0  # stop rule 3
    noise: float = 0.008  # relative std of one run
    wave_size: int = 8
    max_flakes: int = 3
    max_flags: int = 3
    # Mechanisms (in evidence order) seeded in full before a winner may end the sweep; all
    # by default: a winner elsewhere would be missed (measured: docs/benchmarks.md).
    focus: int = 99
    microbatches: int | None = None  # the config's num_pipeline_microbatches (Wave 5)
