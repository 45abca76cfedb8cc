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
# with the profiler) on synthetic data, and a heartbeat timeout long enough that a slow
# compile or a profiler dump is never taken for a dead rank.
JOB_OVERRIDES: dict[str, Scalar] = {"steps": 15, "dataset_type": "synthetic",
                                    "jax_distributed_heartbeat_timeout_seconds": 99999}
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
        **(maxtext or {}), **JOB_OVERRIDES}
    overrides["steps"] = max(spec.steps, JOB_OVERRIDES["steps"])
    return overrides
