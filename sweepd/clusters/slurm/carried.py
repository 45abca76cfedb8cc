"""submit.sh mode: MaxText overrides that do not fit in the job name, carried in a config.

The toolkit appends every passthrough argument to the job name and refuses names over 243
bytes (maxtext-slurm-facts.md §1), so a job with many overrides (the xla-tuning SKILL.md's
MoE sparse ones, the evidence run's profiler settings) cannot pass them all on the command
line. What the toolkit does accept: the model argument names a run config,
`configs/<name>.gpu.yml`, which `_train.sh` hands MaxText, and `configs/<name>.env.sh`,
which it sources after `train_env.sh`. So the overrides that do not fit go into a copy of
the model's config under a per-job name (`<model>-o<6 hex>`), with an env file that only
sources the model's own, and that name is the submission's one short model argument.
submit.sh freezes the repo into the job's artifact at submission, so the two files are
removed from the checkout as soon as it returns; a copy stays in the sweep's directory
for the person to read (the job's artifact holds the one it ran with).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# The name's convention (util/carried_name.py); `carried.config_name` as before.
from sweepd.util.carried_name import config_name as config_name


class CarryError(ValueError):
    """The model's config cannot be read or copied; the message says why."""


def _value(raw: str) -> Any:
    """A command-line value as MaxText's YAML would hold it (`true` -> True, `7` -> 7)."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


@dataclass(frozen=True)
class Written:
    name: str
    files: tuple[Path, ...]   # in the checkout, removed after the submission
    copy: Path                # in the sweep's directory, kept


def write(repo: Path, model: str, token: str, carried: Sequence[str], sweep_dir: Path
          ) -> Written:
    """Write `configs/<model>-oXXXXXX.gpu.yml` (the model's config with `carried` set) and
    its env file into the checkout, and a copy of the config into the sweep's directory."""
    configs = repo / "configs"
    source = configs / f"{model}.gpu.yml"
    try:
        data = yaml.safe_load(source.read_text("utf-8")) or {}   # an empty config: {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise CarryError(f"cannot read {source} to carry {', '.join(carried)}: {e}") from e
    if not isinstance(data, dict):
        raise CarryError(f"{source} is not a YAML mapping: cannot carry {', '.join(carried)}")
    for arg in carried:
        key, _, raw = arg.partition("=")
        data[key] = _value(raw)
    name = config_name(model, token)
    header = (f"# Written by sweepd for one job (token {token}): configs/{model}.gpu.yml with "
              f"the overrides its job name could not hold: {' '.join(carried)}.\n"
              "# Removed from the checkout once submit.sh has frozen its copy.\n")
    text = header + yaml.safe_dump(data, sort_keys=False)
    config = configs / f"{name}.gpu.yml"
    files = [config]
    config.write_text(text, "utf-8")
    model_env = configs / f"{model}.env.sh"
    if model_env.is_file():
        env = configs / f"{name}.env.sh"
        env.write_text(f"# Written by sweepd: the job runs configs/{model}.env.sh as it is.\n"
                       f'source "$(dirname "${{BASH_SOURCE[0]}}")/{model}.env.sh"\n', "utf-8")
        files.append(env)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    copy = sweep_dir / f"{name}.gpu.yml"
    copy.write_text(text, "utf-8")
    return Written(name, tuple(files), copy)


def remove(written: Written) -> None:
    for path in written.files:
        path.unlink(missing_ok=True)
