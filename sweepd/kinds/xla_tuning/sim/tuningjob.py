"""One simulated tuning job: its effective flags, what it prints, and how it ends.

The job's environment is layered the way the toolkit layers it (xla-tuning-facts.md, "How
settings reach a job"), last wins:

    XLA_FLAGS  image flags <- [env file] <- the job's inherited XLA_FLAGS (what sweepd
               appended) <- the XLA dump flags (ENABLE_XLA_DUMP=1) <- [env file, when
               `env_file_last`]; a `_env_XLA_FLAGS=` passthrough replaces the whole value;
               then the job's LIBTPU_INIT_ARGS (a TPU sweep's flags), read after it
    env vars   train_env.sh defaults <- [env file] <- the job's environment <- [env file,
               when `env_file_last`] <- `_env_K=V` passthrough (re-exported last)

The env file is the landscape's `deployed` settings, or, when the scenario names a toolkit
checkout, what that checkout's `configs/<model>.env.sh` leaves in effect when bash sources it
with the job's passthrough overrides (`kinds.xla_tuning.sourced`: guards and all; its
MaxText overrides go in front of the job's own). Then `Landscape.sample` decides the
run: an unknown flag aborts at start-up, a flake is a coordination timeout, the compiled
temp memory above HBM x the memory fraction OOMs, else steady TGS with noise.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.catalog.flags import IMAGE_DEFAULTS
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, RunKind, Sample, sample
from sweepd.kinds.xla_tuning.deploy import sourced
from sweepd.kinds.xla_tuning.evidence.logread import (
    ENV_PREFIXES,
    LIBTPU_INIT_ARGS,
    XLA_FLAGS,
    parse_flags,
)
from sweepd.kinds.xla_tuning.sim.hlo import FILE_NAME, TPU_FILE_NAME, hlo_text
from sweepd.kinds.xla_tuning.sim.tuning import TuningSpec
from sweepd.sim.scenario import FaultKind, FaultSpec
from sweepd.sim.truth import Truth, flops_per_token
from sweepd.util.model_shapes import ModelShape

IMAGE_XLA_FLAGS = " ".join(f"--{k}={v}" for k, v in IMAGE_DEFAULTS.items()
                           if k.startswith("xla_"))
TOOLKIT_ENV = {k: v for k, v in IMAGE_DEFAULTS.items() if not k.startswith("xla_")}
DUMP_ENV = "ENABLE_XLA_DUMP"
_TRUTHY = ("1", "y", "yes", "true")


@dataclass(frozen=True)
class TuningRun:
    landscape: Landscape
    tag: str
    xla_flags: str                   # the effective XLA_FLAGS
    env: dict[str, str]              # the effective tuning env vars
    settings: tuple[Setting, ...]    # what the landscape is asked about
    outcome: Sample
    temp_gib: float
    capacity_gib: float
    unknown: tuple[str, ...]         # every flag the image rejects, `--k=v` as given
    env_lines: tuple[tuple[str, ...], tuple[str, ...]]  # printed by rank 0, by the others
    dump_file: Path | None           # the HLO text an evidence run writes


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p.strip())


def _flag_text(settings: Sequence[Setting]) -> str:
    return " ".join(s.text for s in settings)


def _mentioned(land: Landscape) -> set[str]:
    labels = [*land.effects, *land.deployed, *(m for it in land.interactions
                                               for m in it.members)]
    labels += [lb for per_tag in land.tag_effects.values() for lb in per_tag]
    return {lb.partition("=")[0] for lb in labels} | set(land.unknown)


def _follows(key: str, mentioned: set[str]) -> bool:
    return key.startswith(ENV_PREFIXES) or (key in mentioned and not key.startswith("xla_"))


def _dump_flags(dump_dir: Path) -> str:
    return (f"--xla_dump_hlo_as_text --xla_dump_hlo_module_re=^jit_train_step$ "
            f"--xla_dump_hlo_pipeline_re='(?i)gpu' --xla_dump_to={dump_dir}")


def _resolve_xla(spec: TuningSpec, env_file: Sequence[Setting], inherited: str,
                 passthrough: Mapping[str, str], dump: str) -> tuple[str, str]:
    """(the effective XLA_FLAGS, its value when train_env.sh printed the dump line)."""
    deployed = _flag_text([s for s in env_file if s.layer is Layer.XLA])
    if XLA_FLAGS in passthrough:  # pre-exported before train_env.sh, re-exported after it all
        return passthrough[XLA_FLAGS], _join(passthrough[XLA_FLAGS], dump)
    if spec.env_file_last:
        at_dump = _join(IMAGE_XLA_FLAGS, inherited, dump)
        return _join(at_dump, deployed), at_dump
    at_dump = _join(IMAGE_XLA_FLAGS, deployed, inherited, dump)
    return at_dump, at_dump


def _resolve_env(spec: TuningSpec, land: Landscape, env_file: Sequence[Setting],
                 process: Mapping[str, str], passthrough: Mapping[str, str]) -> dict[str, str]:
    mentioned = _mentioned(land)
    deployed = {s.key: s.value for s in env_file if s.layer is Layer.ENV}
    own = {k: v for k, v in process.items() if _follows(k, mentioned)}
    env = dict(TOOLKIT_ENV)
    for layer in ((own, deployed) if spec.env_file_last else (deployed, own)):
        env.update(layer)
    env.update({k: v for k, v in passthrough.items() if _follows(k, mentioned)})
    return env


def _settings(land: Landscape, xla: str, env: Mapping[str, str],
              overrides: Mapping[str, str]) -> tuple[Setting, ...]:
    mentioned = _mentioned(land)
    out = [Setting(k, v, Layer.XLA) for k, v in parse_flags(xla).items()]
    out += [Setting(k, v, Layer.ENV) for k, v in env.items()]
    out += [Setting(k, v, Layer.MAXTEXT) for k, v in overrides.items() if k in mentioned]
    return tuple(out)


def _env_lines(passthrough: Mapping[str, str], env: Mapping[str, str], xla: str,
               deployed: bool, model: str, dump_lines: Sequence[str]) -> tuple[str, ...]:
    """What a rank prints before training: the image's XLA_FLAGS, then `_train.sh`'s lines
    in order (extracted env, train_env.sh's dump lines, the env file, `printenv | sort`)."""
    lines = [f"{XLA_FLAGS}={IMAGE_XLA_FLAGS}"]
    lines += [f"Extracted env: {k}={v}" for k, v in passthrough.items()]
    exports = [f"  export {k}={v}" for k, v in passthrough.items()]
    if exports:
        lines += ["Pre-exporting extracted environment variables:", *exports]
    lines += dump_lines
    if deployed:
        lines.append(f"Loading per-model env: configs/{model}.env.sh")
    if exports:
        lines += ["Re-exporting extracted environment variables:", *exports]
    shown = {**{k: v for k, v in passthrough.items() if k != XLA_FLAGS}, **env, XLA_FLAGS: xla}
    lines.append("Show all environment variables:")
    lines += [f"{k}={shown[k]}" for k in sorted(shown)]
    return tuple(lines)


def resolve(spec: TuningSpec, seed: int, job_id: str, model: str, overrides: Mapping[str, str],
            passthrough: Mapping[str, str], process: Mapping[str, str] | None = None,
            out_dir: Path | None = None) -> TuningRun:
    """Everything a tuning job prints and how it ends (ValueError: no landscape for it)."""
    process = os.environ if process is None else process
    land = spec.landscape_for(overrides)
    tag = spec.tag_for(land, overrides)
    env_file, overrides = _env_file(spec, land, model, overrides)
    if spec.toolkit is not None:  # the checkout's file, not the landscape's list, is deployed
        land = land.model_copy(update={"deployed": ()})
    # No toolkit on a TPU VM: nothing turns ENABLE_XLA_DUMP into dump flags there.
    dump_on = spec.platform == "gpu" and (
        passthrough.get(DUMP_ENV) or process.get(DUMP_ENV) or "0").lower() in _TRUTHY
    dump_dir = (out_dir or Path("outputs") / job_id) / "xla_dump"
    dump = _dump_flags(dump_dir) if dump_on else ""
    xla, at_dump = _resolve_xla(spec, env_file, process.get(XLA_FLAGS, ""), passthrough, dump)
    others, _ = _resolve_xla(spec, env_file, process.get(XLA_FLAGS, ""), passthrough, "")
    env = _resolve_env(spec, land, env_file, process, passthrough)
    # A TPU job's flags come in LIBTPU_INIT_ARGS (libtpu reads them beside XLA_FLAGS').
    libtpu = process.get(LIBTPU_INIT_ARGS)
    refused = frozenset(k for k in parse_flags(libtpu or "") if k.startswith("xla_dump"))
    if spec.platform == "tpu" and refused:   # libtpu: "Unknown command line flag 'xla_dump_to'"
        land = land.model_copy(update={"unknown": land.unknown | refused})
    settings = _settings(land, _join(xla, libtpu or ""), env, overrides)
    unknown = tuple(s.text for s in settings if s.key in land.unknown)
    outcome = sample(land, settings, tag, random.Random(f"{seed}:{job_id}:tuning"))
    temp, cap = land.memory(settings, tag)
    dump_to = parse_flags(xla).get("xla_dump_to")
    name = TPU_FILE_NAME if spec.platform == "tpu" else FILE_NAME
    dump_file = Path(dump_to.strip("'\"")) / name if dump_to else None
    dump_lines = (f"[XLA dump] Enabled on rank 0 ({DUMP_ENV}={passthrough.get(DUMP_ENV, '1')})",
                  f"[XLA dump] {XLA_FLAGS}={at_dump}") if dump_on else ()
    deployed = bool(land.deployed) or spec.env_file(model) is not None
    shown = env if libtpu is None else {**env, LIBTPU_INIT_ARGS: libtpu}
    lines = (_env_lines(passthrough, shown, xla, deployed, model, dump_lines),
             _env_lines(passthrough, shown, others, deployed, model, ()))
    return TuningRun(land, tag, xla, env, settings, outcome, temp, cap, unknown, lines,
                     dump_file)


def _env_file(spec: TuningSpec, land: Landscape, model: str, overrides: Mapping[str, str]
              ) -> tuple[tuple[Setting, ...], Mapping[str, str]]:
    """What the model's env file sets for this job, and the job's MaxText overrides with
    the file's in front (ValueError when sourcing it fails: the job would fail too)."""
    path = spec.env_file(model)
    if spec.toolkit is None:
        return land.deployed_settings(), overrides
    if path is None:
        return (), overrides
    try:
        got = sourced.source(path, [f"{k}={v}" for k, v in overrides.items()])
    except sourced.SourceError as exc:
        raise ValueError(str(exc)) from exc
    settings = got.settings()
    front = {s.key: s.value for s in settings if s.layer is Layer.MAXTEXT}
    return (tuple(s for s in settings if s.layer is not Layer.MAXTEXT),
            {**front, **overrides})


def evidence_hlo(run: TuningRun, nodes: int, layers: int, step_s: float | None) -> str | None:
    """The HLO dump of a run that compiled (None: it never got that far). `step_s`: the
    steady step seconds the log prints (an OOM run has none: the landscape's base step)."""
    if run.dump_file is None or run.outcome.kind in (RunKind.UNKNOWN_FLAG, RunKind.FLAKE):
        return None
    step = step_s or run.outcome.step_s or run.landscape.step_s_at_base
    return hlo_text(run.landscape.evidence, step, nodes, layers)


def step_jitter(run: TuningRun, steps: int, window: tuple[int, int], seed: str) -> list[float]:
    """Per-step relative deviations whose mean over the steady window is 0, so the window's
    mean TGS is the run's sampled TGS exactly (its noise is the landscape's per-run noise).
    Their spread is that noise times the root of the window's length: the steps read the
    run's noise as its standard error (`evidence/measured_noise.run_noise`), as a run
    whose steps vary independently would (the chip's steps read ~3x above the spread between
    its runs; a spread of `noise` a step read it ~3x below)."""
    rng = random.Random(seed)
    inside_n = max(1, min(window[1], steps - 1) - window[0] + 1)
    noise = run.landscape.noise * math.sqrt(inside_n)
    jitter = [rng.gauss(0.0, noise) for _ in range(steps)]
    inside = [jitter[s] for s in range(window[0], min(window[1], steps - 1) + 1)]
    shift = math.fsum(inside) / len(inside) if inside else 0.0
    return [j - shift for j in jitter]


def truth_of(run: TuningRun, spec: TuningSpec, shape: ModelShape, overrides: Mapping[str, str],
             peak_tflops: float) -> Truth:
    """The run as the timeline needs it (ValueError on a bad batch or sequence override)."""
    try:
        batch = int(overrides.get("per_device_batch_size", spec.per_device_batch_size))
        seq = int(overrides.get("max_target_length", shape.seq_len))
    except ValueError as exc:
        raise ValueError(f"bad override value: {exc}") from exc
    if batch < 1 or seq < 1:
        raise ValueError("per_device_batch_size and max_target_length must be >= 1")
    land, kind = run.landscape, run.outcome.kind
    tgs = run.outcome.tgs or 0.0
    tflops = tgs * flops_per_token(shape, seq) / 1e12
    return Truth(fits=kind is not RunKind.OOM, tgs=tgs, mfu=100 * tflops / peak_tflops,
                 tflops=tflops, mem_used_gb=land.argument_gib, mem_limit_gb=run.capacity_gib,
                 batch=batch, seq_len=seq, max_batch=batch,
                 alloc_gib=round(run.temp_gib, 1) if kind is RunKind.OOM else 0.0,
                 temp_gb=run.temp_gib, argument_gb=land.argument_gib, output_gb=land.output_gib)


def fault_of(run: TuningRun) -> FaultSpec | None:
    """An unknown flag aborts at start-up; a flake dies in JAX's coordination service."""
    if run.outcome.kind is RunKind.UNKNOWN_FLAG:
        return FaultSpec(kind=FaultKind.UNKNOWN_FLAG, flag=" ".join(run.unknown))
    if run.outcome.kind is RunKind.FLAKE:
        return FaultSpec(kind=FaultKind.COORD_TIMEOUT)
    return None
