"""What a local job runs, and starting it: the train command with the run's MaxText
overrides as `key=value` arguments, in the daemon's environment with the configured env,
the run's env and its XLA flags over it, under the wrapper (`wrapper.py`), detached so it
outlives the daemon."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweepd.clusters.local import wrapper
from sweepd.clusters.local.records import STARTED, STARTING, JobRecords

# Detach: the shell backgrounds the wrapper and exits, so the wrapper is nobody's child
# here (no zombie for the daemon to reap) and lives on when the daemon stops.
_LAUNCH = 'err=$1; shift; "$@" </dev/null >/dev/null 2>>"$err" & echo $!'


def train_argv(train_command: str, overrides: Mapping[str, str]) -> list[str]:
    """The train command (shlex-split) and each override as MaxText's CLI takes it."""
    return [*shlex.split(train_command), *(f"{k}={v}" for k, v in overrides.items())]


def job_env(base: Mapping[str, str], configured: Mapping[str, str], record: Mapping[str, Any]
            ) -> dict[str, str]:
    """The daemon's environment, the configured `env` over it, the run's over that, then
    the run's XLA flags appended to the variable they go in (`flags_var`: XLA_FLAGS, or
    LIBTPU_INIT_ARGS on TPU), as direct mode appends them to what the job inherits."""
    env = {**base, **configured, **record["env"]}
    # As direct mode's batch script: the job's own directory beside its log, unless the
    # run sets OUTPUT_PATH itself (the daemon's own is not the job's).
    if "OUTPUT_PATH" not in record["env"]:
        env["OUTPUT_PATH"] = record["output_path"]
    flags = list(record["xla_flags"])
    if flags:
        var = record["flags_var"]
        env[var] = " ".join(p for p in (env.get(var, "").strip(), *flags) if p)
    return env


def start(records: JobRecords, record: dict[str, Any], configured: Mapping[str, str],
          slot_fd: int) -> None:
    """Launch the job's wrapper and record it STARTED with its pid and start ticks (the
    caller holds the scheduler lock, and the machine's slot on `slot_fd`, which the
    wrapper inherits and keeps: the slot is the job's from here). STARTING is on disk
    first: a crash between the two leaves a record the wrapper's own pid file completes."""
    record.update(state=STARTING, starting_at=time.time())
    records.save(record)
    err = records.jobs_dir / f"{record['id']}.stderr"
    cmd = [sys.executable, str(Path(wrapper.__file__).resolve()), str(records.jobs_dir),
           str(record["id"]), str(slot_fd)]
    launched = subprocess.run(["sh", "-c", _LAUNCH, "sh", str(err), *cmd],
                              env=job_env(os.environ, configured, record),
                              capture_output=True, text=True, check=True,
                              start_new_session=True, pass_fds=(slot_fd,))
    pid = int(launched.stdout.strip())
    record.update(state=STARTED, wrapper=[pid, wrapper.start_ticks(pid)],
                  started_at=time.time())
    records.save(record)
