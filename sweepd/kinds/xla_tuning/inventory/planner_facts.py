"""What the planner reads beyond the sweep's own runs (Kind.gather): the Inventory
(`inventory.py`) and the latest finished model-perf sweep's optimum, as `XlaFacts`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweepd.kinds.model_perf import exports as model_perf
from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.inventory.inventory import flags_on_its_lines, inventory, sim_inventory

if TYPE_CHECKING:
    from sweepd.kinds.registry import GatherContext
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
    from sweepd.store.store import Store


@dataclass(frozen=True)
class ModelPerfPrior:
    """The latest finished model-perf sweep of the same cell (latest_optimum): its optimum."""

    sweep: int
    best: int


@dataclass(frozen=True)
class XlaFacts:
    """What the planner reads beyond the sweep's own runs (Kind.gather)."""

    model_perf: ModelPerfPrior | None = None  # the default per_device_batch_size
    # The Inventory: what the model's env file sets (restore_default puts it back).
    deployed: tuple[Setting, ...] = ()
    # Where the Inventory was read (None: no checkout, nothing read).
    env_file: str | None = None
    # submit.sh mode: the env file is sourced after train_env.sh, so an XLA flag it sets
    # cannot be changed by a profile's arm (train_env.placement would refuse the run).
    sourced_last: bool = False
    # The XLA flags on any line of the env file, guarded or not: what placement reads.
    file_flags: frozenset[str] = frozenset()
    # The sweep's output directory (its jobs' logs and outputs; None: not known, e.g. at
    # validate): a TPU evidence run's HLO dump goes under it.
    outputs: Path | None = None

    def fixed_flags(self) -> frozenset[str]:
        """XLA flags no profile can change here (their arms would lose to the env file):
        those it sets for these jobs, and those on its other lines, which the
        submission's check reads as set (else a profile of one is refused at submit)."""
        if not self.sourced_last:
            return frozenset()
        return frozenset(s.key for s in self.deployed if s.layer is Layer.XLA) | self.file_flags

    def inventory_line(self) -> str:
        """The Inventory as recorded with the sweep's first run."""
        if self.env_file is None:
            return "Inventory: no toolkit checkout (not submit.sh mode): no env file read"
        sets = ", ".join(s.label for s in self.deployed) or "no XLA flag or NCCL/XLA env var"
        return f"Inventory: {self.env_file} sets {sets}"


async def facts(store: Store, spec: XlaTuningSpec, where: GatherContext) -> XlaFacts:
    """What the planner needs beyond the sweep's own runs (Kind.gather): the Inventory (the
    checkout's `configs/<model>.env.sh`, submit.sh mode) and the latest finished
    model-perf sweep of the same cell (model, node count and parallelism; one of the
    config's own axes when none ran this parallelism), whose optimum is the default
    per_device_batch_size."""
    if where.backend == "sim":
        from sweepd.sim.scenario import DEFAULT_SCENARIO  # the simulator only when used
        deployed, env_file = sim_inventory(where.scenario or DEFAULT_SCENARIO, spec)
    else:
        # Sourcing the env file runs bash (once per file version): off the event loop.
        deployed, env_file = await asyncio.to_thread(inventory, where.repo, spec)
    prior = await model_perf_prior(store, spec)
    outputs = (where.outputs / f"sweep-{where.sweep}"
               if where.outputs is not None and where.sweep is not None else None)
    return XlaFacts(prior, deployed, env_file, sourced_last=where.repo is not None,
                    file_flags=flags_on_its_lines(where.repo, spec.model), outputs=outputs)


async def model_perf_prior(store: Store, spec: XlaTuningSpec) -> ModelPerfPrior | None:
    found = await model_perf.latest_optimum(store, spec.model, spec.count, spec.parallelism)
    return None if found is None else ModelPerfPrior(found.sweep, found.best)
