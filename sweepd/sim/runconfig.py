"""The run config a simulated job reads, as MaxText reads `configs/<name>.gpu.yml`.

In submit.sh mode the model argument may name a per-job config sweepd wrote
(clusters/slurm/carried.py): the model's config plus the overrides its job name could not hold.
The simulated trainer knows models by their built-in names, so for such a name it reads the
config from the toolkit's frozen copy ($MAXTEXT_SLURM_DIR/configs) and takes the model and
those overrides from it, below the command line's (MaxText: the command line wins). Without
this the simulator refused every carried job as an unknown model, which no real run does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sweepd.util.carried_name import model_of

# Keys that name the config's layering, not settings a job runs with.
_STRUCTURE = frozenset({"base_config", "model_name"})


@dataclass(frozen=True)
class RunConfig:
    model: str
    overrides: dict[str, str] = field(default_factory=dict)


def _text(value: object) -> str:
    """A YAML value as the command line would spell it (`True` -> `true`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def per_job_config(model: str, env: Mapping[str, str]) -> RunConfig | None:
    """The per-job config `model` names in the job's toolkit copy; None when it is not one
    (a built-in name, no toolkit, or no such file): the model argument is then used as is."""
    toolkit = env.get("MAXTEXT_SLURM_DIR")
    if not toolkit:
        return None
    base = model_of(model)
    if base is None:
        return None
    path = Path(toolkit) / "configs" / f"{model}.gpu.yml"
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    named = data.get("model_name")
    return RunConfig(named if isinstance(named, str) and named else base,
                     {str(k): _text(v) for k, v in data.items() if k not in _STRUCTURE})


def output_path(job_id: str, job_name: str, log: Path | None,
                environ: Mapping[str, str]) -> Path:
    """Where the toolkit puts a job's outputs: `$OUTPUT_PATH`, else `<jobid>-<name>/` beside
    the log (or under `$JOB_WORKSPACE`, else `./outputs`)."""
    if environ.get("OUTPUT_PATH"):
        return Path(environ["OUTPUT_PATH"])
    base = log.parent if log is not None else Path(environ.get("JOB_WORKSPACE") or "outputs")
    return base / f"{job_id}-{job_name}"
