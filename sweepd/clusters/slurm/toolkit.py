"""What maxtext-slurm's `./submit.sh` does with its arguments and prints (pure): the model
argument, the config a model name resolves to, the job id it reports and the line that
says why it refused (maxtext-slurm-facts.md §1).
"""

from __future__ import annotations

import re
from pathlib import Path

from sweepd.clusters.base import JobRequest

# The line submit.sh reads its job id from (it prints `[ARTIFACT] …` after it).
_SUBMITTED_LINE = "Submitted batch job"
# The lines that say why submit.sh refused, most telling first.
_FAILING_LINES = (re.compile(r"^sbatch: error:"), re.compile(r"^!!!"), re.compile(r"^\[ERROR\]"),
                  re.compile(r"error", re.IGNORECASE))


def resolve_model(repo: Path, model: str) -> str | None:
    """The config name submit.sh resolves `model` to: an exact `configs/<model>.gpu.yml`,
    else the one config whose name contains it; None when submit.sh would refuse it."""
    if (repo / "configs" / f"{model}.gpu.yml").is_file():
        return model
    found = sorted((repo / "configs").glob(f"*{model}*.gpu.yml"))
    return found[0].name.removesuffix(".gpu.yml") if len(found) == 1 else None



def model_spec(request: JobRequest) -> str:
    """`model[[:alias]:tag]` for submit.sh."""
    if request.alias:
        return f"{request.model}:{request.alias}:{request.tag or ''}"
    return f"{request.model}:{request.tag}" if request.tag else request.model


def submit_sh_job_id(out: str) -> str | None:
    """The job id as submit.sh itself reads it: the last word of the line matching
    `Submitted batch job` (not the last word of the output: `[ARTIFACT] …` follows it)."""
    ids = [line.split()[-1] for line in out.splitlines() if _SUBMITTED_LINE in line]
    return ids[-1] if ids and ids[-1].isdigit() else None


def failing_line_first(output: str) -> str:
    """submit.sh's whole output with the line that says why it failed (`sbatch: error: …`,
    `!!! …`, `[ERROR] …`) moved to the front: a person reads the first line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    for pattern in _FAILING_LINES:
        hit = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
        if hit is not None:
            return "\n".join([lines[hit], *lines[:hit], *lines[hit + 1:]])
    return "\n".join(lines)

