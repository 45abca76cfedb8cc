"""What a simulated job does: the truth and the fault table asked, its timeline planned.

The plan is played by `sim/player.py`, in the trainer's own process (`python -m sweepd.sim
train`, one rank under srun) or, on the embedded cluster, from the file the cluster writes
when it starts the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from sweepd.sim.faults import pick_fault
from sweepd.sim.hooks import JobPlace, sim_hooks
from sweepd.sim.jobinput import JobInput
from sweepd.sim.plan import plan_job
from sweepd.sim.player import JobMeta, run_all_ranks, run_one_rank
from sweepd.sim.runconfig import output_path, per_job_config
from sweepd.sim.scenario import FaultKind, FaultSpec, Scenario
from sweepd.sim.slowing import at_job
from sweepd.sim.timeline import Plan
from sweepd.sim.truth import true_outcome
from sweepd.util.model_shapes import UnknownModel, resolve_model


def split_passthrough(args: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """`key=value` -> MaxText overrides, `_env_K=V` -> environment."""
    overrides: dict[str, str] = {}
    env: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise ValueError(f"passthrough argument {arg!r} is not key=value")
        if key.startswith("_env_"):
            env[key.removeprefix("_env_")] = value
        else:
            overrides[key] = value
    return overrides, env


def plan_command(scenario: Scenario, state_dir: Path, meta: JobMeta, commit: str | None,
                 environ: Mapping[str, str], log: Path | None) -> tuple[Plan, JobMeta]:
    """The job a trainer command line describes (`meta.passthrough` its `key=value` and
    `_env_K=V` arguments), in the process environment `environ`; a per-job config the model
    argument names (`sim/runconfig.py`) gives the model and its overrides. ValueError on a
    malformed passthrough argument."""
    overrides, env = split_passthrough(meta.passthrough)
    if (config := per_job_config(meta.model, environ)) is not None:
        meta = replace(meta, model=config.model)
        overrides = {**config.overrides, **overrides}
    out_dir = output_path(meta.job_id, meta.job_name, log, environ)
    return plan_job(build_input(scenario, state_dir, meta, overrides, env, commit, environ,
                                out_dir)), meta


def build_input(scenario: Scenario, state_dir: Path, meta: JobMeta, overrides: Mapping[str, str],
                env: Mapping[str, str], commit: str | None,
                process_env: Mapping[str, str] | None = None,
                out_dir: Path | None = None) -> JobInput:
    """Ask the truth and the fault table what happens to this job.

    `process_env` is the job's own environment (XLA_FLAGS sweepd appended, NCCL_* ...; default
    os.environ), `out_dir` its output directory (the XLA dump goes under it). A node that
    slows mid-sweep (`slows_from_job`) has its speed as of this job's number on it."""
    scenario = at_job(scenario, state_dir, meta.job_id, meta.nodes)
    base = JobInput(scenario=scenario, model=meta.model, job_id=meta.job_id, nodes=meta.nodes,
                    overrides=overrides, truth=None)
    try:
        model = resolve_model(meta.model).name
    except UnknownModel:
        return replace(base, fault=FaultSpec(kind=FaultKind.CONFIG_ERROR))
    place = JobPlace(state_dir, env, process_env, out_dir)
    for hook in sim_hooks():   # a kind that models this model's jobs decides them
        section = scenario.section(hook.section)
        job = None if section is None else hook.job(replace(base, model=model), section, place)
        if job is not None:
            return job
    try:
        truth = true_outcome(scenario, model, meta.nodes, overrides, env, commit)
    except ValueError as exc:
        return replace(base, model=model, error=str(exc))
    if truth.fail is not None:       # a broken commit fails before any hardware fault matters
        return replace(base, model=model, truth=truth, fault=FaultSpec(kind=truth.fail))
    fault = pick_fault(scenario, state_dir, meta.job_id, model, meta.nodes, truth.batch)
    return replace(base, model=model, truth=truth, fault=fault)


__all__ = ["JobMeta", "build_input", "plan_command", "run_all_ranks", "run_one_rank",
           "split_passthrough"]
