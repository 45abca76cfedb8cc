"""A planned run as its run's params (`RunParams`): the overrides every tuning job carries,
the cell's parallelism, the per_device_batch_size and where it came from, the time limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweepd.kinds.xla_tuning.catalog.catalog import Layer
from sweepd.kinds.xla_tuning.deploy.job_overrides import (  # re-exported: where they were
    AXIS_OVERRIDES,
    JOB_OVERRIDES,
    job_overrides,
    parallelism_overrides,
)
from sweepd.kinds.xla_tuning.evidence.applied import DUMP_ENV
from sweepd.kinds.xla_tuning.evidence.results import EVIDENCE
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.kinds.xla_tuning.waves.planned import Planned
from sweepd.store.rows import RunParams, Scalar

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts

__all__ = ["AXIS_OVERRIDES", "JOB_OVERRIDES", "WAVE", "Batch", "batch_of", "job_overrides",
           "parallelism_overrides", "run_params"]

# The label (`RunParams.labels`) a run's wave is kept under, as text; `gather.wave_of` reads it.
WAVE = "wave"

# sbatch --time per job (the template's 45:00; the evidence run, with the profiler and the
# HLO dump, 50:00): a hung job ends on its own even if nobody is watching.
JOB_TIME = "45:00"
EVIDENCE_TIME = "50:00"


@dataclass(frozen=True)
class Batch:
    """The per_device_batch_size the jobs run with, and where it came from."""

    value: int | None
    source: str


def batch_of(spec: XlaTuningSpec, facts: XlaFacts) -> Batch:
    if spec.per_device_batch_size is not None:
        return Batch(spec.per_device_batch_size, "the spec")
    prior = facts.model_perf
    if prior is not None:
        return Batch(prior.best, f"model-perf sweep {prior.sweep}'s optimum")
    return Batch(None, "the config's value (no finished model-perf sweep of this model on "
                       f"{spec.count} nodes)")


# A TPU evidence run's HLO dump: its flags in XLA_FLAGS, where libtpu's compiler reads them
# (libtpu stops at start on `--xla_dump_to` in LIBTPU_INIT_ARGS: "Unknown command line flag
# 'xla_dump_to'", seen on the v5e chip with JAX 0.10.2); text is the default format; the
# train step's module only. Kept short: a job's env rides in its name (<= 243 bytes).
DUMP_FLAGS = "--xla_dump_hlo_module_re=train_step"
DUMP_DIR = "xla_dump"


def dump_env(spec: XlaTuningSpec, dump_dir: str) -> dict[str, str]:
    """What a TPU evidence run sends in place of the toolkit's ENABLE_XLA_DUMP switch (which
    nothing reads off the toolkit): XLA_FLAGS with the dump flags, after any the spec sets."""
    own = spec.env.get("XLA_FLAGS", "")
    return {"XLA_FLAGS": " ".join(p for p in (own, f"--xla_dump_to={dump_dir}", DUMP_FLAGS)
                                  if p)}


def dump_overrides(dump_dir: str) -> dict[str, Scalar]:
    """A program JAX finds in its persistent compilation cache is not compiled again (the
    dump flags are left out of the cache key), and MaxText's `jax_cache_dir` turns that cache
    on (the chip driver's runs share one): the evidence run gets a cache of its own, empty,
    so its dump is the compiler's own (with JAX 0.10.2 on CPU a warm cache still wrote the
    module's after-optimizations text, without its reports; not tried on a TPU)."""
    return {"jax_cache_dir": f"{dump_dir}/jax_cache"}


def run_params(spec: XlaTuningSpec, planned: Planned, batch: Batch,
               dump_dir: str = DUMP_DIR) -> RunParams:
    """The one place a planned run becomes a run's params: its XLA flags appended to the
    job's inherited XLA_FLAGS (never a replacement), its env vars on top of the spec's, and
    the overrides every tuning job carries (spec, parallelism, config tag, the profile's
    MaxText settings, then steps=15 dataset_type=synthetic and the heartbeat timeout:
    SKILL.md, always), and the template's time limit. A TPU evidence run asks for its HLO
    dump in XLA_FLAGS (`dump_env`), into `dump_dir` (the sweep's output directory's
    `xla_dump-<label>`, from the planner)."""
    settings = planned.profile.settings
    maxtext: dict[str, Scalar] = {s.key: s.value for s in settings if s.layer is Layer.MAXTEXT}
    overrides = job_overrides(spec, planned.tag, maxtext)
    if batch.value is not None:
        overrides["per_device_batch_size"] = batch.value
    env = {s.key: s.value for s in settings if s.layer is Layer.ENV}
    if planned.profile.name == EVIDENCE and spec.platform == "tpu":
        env.pop(DUMP_ENV, None)
        env.update(dump_env(spec, dump_dir))
        overrides.update(dump_overrides(dump_dir))
    return RunParams(
        profile=planned.profile.name, labels={WAVE: str(planned.wave)}, tag=planned.tag,
        xla_flags=[s.text for s in settings if s.layer is Layer.XLA],
        env=env,
        overrides=overrides,
        time_limit=EVIDENCE_TIME if planned.profile.name == EVIDENCE else JOB_TIME)
