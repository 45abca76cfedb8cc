"""The MaxText overrides every tuning job carries: the spec's, the cell's parallelism, the
config tag's, then the tuning job's own (SKILL.md, "Submission template"). Apart from
`run_params` so that what reads a job's overrides without planning one (the Inventory's
sourcing of the env file, `sourced`) does not depend on the planner's facts."""

from __future__ import annotations

from collections.abc import Mapping

from sweepd.kinds.xla_tuning.catalog.catalog import Axis
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import Scalar

# Every tuning job (SKILL.md, "Submission template"): 15 steps (steady window 5-14, 9-14
# with the profiler) on synthetic data.
JOB_OVERRIDES: dict[str, Scalar] = {"steps": 15, "dataset_type": "synthetic"}
# On GPU also a heartbeat timeout long enough that a slow compile or a profiler dump is never
# taken for a dead rank (the template; the toolkit's MaxText knows the key). Upstream MaxText,
# what TPU runs, has no such key and refuses to start with it (on the v5e chip, e591f30:
# `ValueError: 'jax_distributed_heartbeat_timeout_seconds' not in ...`).
GPU_JOB_OVERRIDES: dict[str, Scalar] = {"jax_distributed_heartbeat_timeout_seconds": 99999}
# Every key a tuning job adds that a production job of the cell would not pass.
TUNING_ONLY_KEYS = frozenset({*JOB_OVERRIDES, *GPU_JOB_OVERRIDES})
# The MaxText override each axis is passed as (SKILL.md, "Submission template").
AXIS_OVERRIDES: dict[Axis, str] = {Axis.FSDP: "dcn_fsdp_parallelism",
                                   Axis.PP: "dcn_pipeline_parallelism",
                                   Axis.TP: "ici_tensor_parallelism"}


def parallelism_overrides(spec: XlaTuningSpec) -> dict[str, Scalar]:
    """The MaxText overrides that set the cell's parallelism: each axis the parallelism
    uses (degree > 1). Axes at 1 are left to the config, as every override lengthens the
    job name submit.sh builds (<= 243 bytes); a config that sets another axis > 1 needs
    that axis at 1 in the spec's `overrides`."""
    par = spec.parsed_parallelism()
    return {key: par.degree(axis) for axis, key in AXIS_OVERRIDES.items()
            if par.degree(axis) > 1}


def job_overrides(spec: XlaTuningSpec, tag: str, maxtext: Mapping[str, Scalar] | None = None
                  ) -> dict[str, Scalar]:
    """The MaxText overrides a job of the config tag carries (bar the batch size): the
    spec's, the parallelism's, the tag's, a profile's `maxtext`, then the tuning job's own."""
    overrides: dict[str, Scalar] = {
        **spec.overrides, **parallelism_overrides(spec), **spec.config_tags[tag],
        **(maxtext or {}), **tuning_overrides(spec)}
    overrides["steps"] = max(spec.steps, JOB_OVERRIDES["steps"])
    return overrides


def tuning_overrides(spec: XlaTuningSpec) -> dict[str, Scalar]:
    """The overrides every tuning job of the spec's platform adds."""
    return {**JOB_OVERRIDES, **(GPU_JOB_OVERRIDES if spec.platform == "gpu" else {})}
