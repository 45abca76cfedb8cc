"""What the planner is given: the record `thresholds.XlaThresholds` (every stop rule's number
and option, its defaults the SKILL.md's; inherited, never copied) and the spec's cell (its
parallelism, catalog, config tags, what the env file deploys, what the evidence read)."""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.thresholds import XlaThresholds


@dataclass(frozen=True)
class Inputs(XlaThresholds):
    """The record's fields are keyword-only (`Inputs(par, catalog, win=0.04)`)."""

    parallelism: Parallelism
    catalog: tuple[Profile, ...]
    tags: tuple[str, ...] = ("default",)  # the first is the primary config tag
    deployed: tuple[Setting, ...] = ()  # what the model's env file sets (the Inventory)
    # The most runs (jobs, each failure included) the sweep may make, a cap beside the 8 h
    # (None: none, the SKILL.md's rules): reached, the sweep ends as at the 8 h stop.
    max_runs: int | None = None
    microbatches: int | None = None  # the config's num_pipeline_microbatches (Wave 5)
    # Catalog profiles left out because every setting already holds in the job
    # (`in_effect.without_in_effect`): the verdict names them.
    in_effect: tuple[str, ...] = ()
    # The devices one job runs on (nodes x devices per node; None: not known) and how that
    # was read: one device has no collectives (`no_collectives.without_collectives`).
    devices: int | None = None
    devices_how: str = ""
    # Catalog profiles left out because they act on collectives alone and the program has
    # none (rule `catalog.no_collectives`), and the evidence it has none: the verdict says both.
    no_collectives: tuple[str, ...] = ()
    no_collectives_why: str = ""
