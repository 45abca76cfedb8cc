"""The name of a per-job config that carries the overrides a job name could not hold
(`clusters/slurm/carried.py` writes it): `<model>-o<6 hex>`. Here apart, importing nothing,
so that the simulated trainer reads a carried job's model without the Slurm backend."""

from __future__ import annotations

import hashlib
import re

SUFFIX = "-o"
_NAME = re.compile(rf"^(?P<model>.+){re.escape(SUFFIX)}[0-9a-f]{{6}}$")


def config_name(model: str, token: str) -> str:
    """The per-job config's name: the model's, and 6 hex of the job's token (unique per
    job, so two submissions in flight never share a file)."""
    return f"{model}{SUFFIX}{hashlib.sha1(token.encode()).hexdigest()[:6]}"


def model_of(name: str) -> str | None:
    """The model a per-job config name was made from (`config_name`'s inverse), else None."""
    match = _NAME.match(name)
    return match.group("model") if match else None
