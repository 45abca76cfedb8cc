"""What a model's env file leaves in effect for one job: the file sourced by a real bash
the way the toolkit's `_train.sh` sources it (in the shell that holds the job's
`PASSTHROUGH_ARGS` and `EXTRACTED_ENV_MAP`, after `train_env.sh`'s exports).

The simulated cluster uses it when its scenario names a toolkit checkout (so the jobs run
with what the checkout's env file really sets, guards included), and the deployment
bench and tests use it to check that a patched file puts the verdict's recipe in effect
for the cell's jobs and nothing for any other parallelism's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepd.kinds.xla_tuning.catalog import Layer, Setting
from sweepd.kinds.xla_tuning.logread import parse_flags

_SEP = "\0--sweepd-passthrough--\0"
_SCRIPT = f"""
PASSTHROUGH_ARGS=("$@")
declare -A EXTRACTED_ENV_MAP
source "$SWEEPD_ENV_FILE" >/dev/null
env -0
printf '{_SEP.replace(chr(0), chr(92) + "0")}'
if [[ ${{#PASSTHROUGH_ARGS[@]}} -gt 0 ]]; then printf '%s\\0' "${{PASSTHROUGH_ARGS[@]}}"; fi
"""
# The shell's own variables, never a setting of the file's.
_SHELL = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "SWEEPD_ENV_FILE", "PATH"})


class SourceError(RuntimeError):
    """The env file failed when sourced (a job of the checkout would fail too)."""


@dataclass(frozen=True)
class Sourced:
    xla_flags: str  # XLA_FLAGS after the file (appended to what the job inherited)
    env: dict[str, str]  # env vars the file set or changed
    passthrough: tuple[str, ...]  # PASSTHROUGH_ARGS after the file

    def settings(self) -> tuple[Setting, ...]:
        """Everything the file leaves in effect, last wins: XLA flags, env vars, and MaxText
        overrides the file put in front of the job's own (a later one of the job's wins)."""
        out = [Setting(k, v, Layer.XLA) for k, v in parse_flags(self.xla_flags).items()]
        out += [Setting(k, v, Layer.ENV) for k, v in self.env.items() if k != "XLA_FLAGS"]
        maxtext: dict[str, str] = {}
        for arg in self.passthrough:
            key, sep, value = arg.partition("=")
            if sep and not key.startswith("_env_"):
                maxtext[key] = value
        out += [Setting(k, v, Layer.MAXTEXT) for k, v in maxtext.items()]
        return tuple(out)


def source(env_file: Path, passthrough: Sequence[str] = (), xla_flags: str = "",
           env: Mapping[str, str] | None = None, timeout: float = 30.0) -> Sourced:
    """Source `env_file` in bash with this job's passthrough overrides (`key=value`) and
    inherited XLA_FLAGS / env vars; what is in effect afterwards."""
    bash = shutil.which("bash")
    if bash is None:
        raise SourceError("bash is not on PATH")
    start = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {}),
             "SWEEPD_ENV_FILE": str(env_file)}
    if xla_flags:
        start["XLA_FLAGS"] = xla_flags
    res = subprocess.run([bash, "-c", _SCRIPT, "bash", *passthrough], env=start,
                         capture_output=True, timeout=timeout, check=False)
    if res.returncode != 0:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SourceError(f"sourcing {env_file} failed (exit {res.returncode}): "
                          f"{err[-1] if err else 'no message'}")
    out = res.stdout.decode("utf-8", "replace")
    env_part, _, rest = out.partition(_SEP)
    after: dict[str, str] = {}
    for item in env_part.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key not in _SHELL:
            after[key] = value
    changed = {k: v for k, v in after.items() if start.get(k) != v}
    args = tuple(a for a in rest.split("\0") if a) if rest else ()
    return Sourced(after.get("XLA_FLAGS", ""), changed, args)
