"""What the local backend needs before a job can start, said in one line each: the train
command's program found and executable (on PATH, or a path from the working directory),
and the working directory there. `sweepd check` reports it; a start refuses without it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from sweepd.config import LocalConfig


def train_command_problem(settings: LocalConfig, env: Mapping[str, str] | None = None
                          ) -> str | None:
    """Why no job could start with this train command and workdir, or None."""
    env = os.environ if env is None else env
    workdir = settings.workdir
    if workdir is not None and not workdir.is_dir():
        return f"cluster.local.workdir: {workdir} is not a directory"
    argv = settings.argv
    if not argv:
        return "cluster.local.train_command is empty"
    program = argv[0]
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else \
            (workdir or Path.cwd()) / program
        if not path.is_file() or not os.access(path, os.X_OK):
            return (f"cluster.local.train_command: {path} is not an executable file")
        return None
    search = {**env, **settings.env}.get("PATH", os.defpath)
    if shutil.which(program, path=search) is None:
        return f"cluster.local.train_command: {program} is not on PATH"
    return None


def describe(settings: LocalConfig) -> str:
    """The train command and where it runs, for `sweepd check`'s ok line."""
    where = f" in {settings.workdir}" if settings.workdir else ""
    return f"{settings.train_command}{where}, its overrides following as key=value"
