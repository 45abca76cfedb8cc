"""What a model's env file leaves in effect for one job: the file sourced by a real bash
the way the toolkit's `_train.sh` sources it (in the shell that holds the job's
`PASSTHROUGH_ARGS` and `EXTRACTED_ENV_MAP`, after `train_env.sh`'s exports).

The simulated cluster uses it when its scenario names a toolkit checkout (so the jobs run
with what the checkout's env file really sets, guards included), the deployment bench and
tests use it to check that a patched file puts the verdict's recipe in effect for the
cell's jobs and nothing for any other parallelism's, and `report --apply` proves with it
(`prove`) that the file it wrote does so for the cell's jobs, or says why not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Parallelism, Setting
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.job_overrides import TUNING_ONLY_KEYS
from sweepd.kinds.xla_tuning.evidence.logread import parse_flags

_SEP = "\0--sweepd-passthrough--\0"
_SCRIPT = f"""
PASSTHROUGH_ARGS=("$@")
declare -A EXTRACTED_ENV_MAP
source "$SWEEPD_ENV_FILE" >/dev/null
env -0
printf '{_SEP.replace(chr(0), chr(92) + "0")}'
if [[ ${{#PASSTHROUGH_ARGS[@]}} -gt 0 ]]; then printf '%s\\0' "${{PASSTHROUGH_ARGS[@]}}"; fi
"""
# The same, tracing each command the file runs (its line number) on descriptor 3.
_TRACE = f"""
PASSTHROUGH_ARGS=("$@")
declare -A EXTRACTED_ENV_MAP
exec 3>&2
BASH_XTRACEFD=3
PS4='+{_SEP.replace(chr(0), "")}${{LINENO}}@${{BASH_SOURCE[0]}}@ '
set -x
source "$SWEEPD_ENV_FILE" >/dev/null 2>&1
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
        # A TPU recipe's flags are in LIBTPU_INIT_ARGS (libtpu reads them after XLA_FLAGS').
        flags = " ".join([self.xla_flags, self.env.get("LIBTPU_INIT_ARGS", "")])
        out = [Setting(k, v, Layer.XLA) for k, v in parse_flags(flags).items()]
        out += [Setting(k, v, Layer.ENV) for k, v in self.env.items()
                if k not in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")]
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


def lines_run(env_file: Path, passthrough: Sequence[str] = (), timeout: float = 30.0
              ) -> list[int]:
    """The line numbers of `env_file` whose commands ran, in order, when a job with this
    passthrough sourced it (why a setting did not take effect: where the file stopped)."""
    bash = shutil.which("bash")
    if bash is None:
        raise SourceError("bash is not on PATH")
    start = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SWEEPD_ENV_FILE": str(env_file)}
    res = subprocess.run([bash, "-c", _TRACE, "bash", *passthrough], env=start,
                         capture_output=True, timeout=timeout, check=False)
    mark = re.escape(_SEP.replace(chr(0), ""))
    here = re.compile(rf"^\++{mark}(\d+)@(.*?)@ ")
    out = []
    for line in res.stderr.decode("utf-8", "replace").splitlines():
        m = here.match(line)
        if m and m.group(2) == str(env_file):
            out.append(int(m.group(1)))
    return out


@dataclass(frozen=True)
class Job:
    """A job of the cell the patched file is proven on: what it is, its passthrough."""

    name: str
    passthrough: tuple[str, ...]


def cell_jobs(env_file: Path, model: str, par: Parallelism,
              overrides: Mapping[str, object] | None = None) -> list[Job]:
    """The cell's jobs as the toolkit would source the env file for them: the sweep's own
    (`overrides`, its jobs' MaxText overrides; else the cell's axes), a production job (no
    synthetic-data or step overrides), and one that passes no axis at all when the model's
    gpu.yml sets the axes (to the cell's degrees, or to -1: filled from the devices)."""
    axes = {k: str(par.degree(a)) for k, a in deploy.AXIS_KEYS}
    sweep = ({k: str(v) for k, v in overrides.items()} if overrides is not None
             else {k: v for k, v in axes.items() if v != "1"})
    out = [Job("the sweep's jobs", tuple(f"{k}={v}" for k, v in sweep.items()))]
    prod = {k: v for k, v in sweep.items() if k not in TUNING_ONLY_KEYS}
    if prod != sweep:
        out.append(Job("a production job of the cell",
                       tuple(f"{k}={v}" for k, v in prod.items())))
    yml = gpu_axes(env_file, model)
    if yml and all(yml.get(k, "1") in (v, "-1") for k, v in axes.items()):
        out.append(Job("a job that passes no parallelism override (the gpu.yml's)",
                       tuple(f"{k}={v}" for k, v in prod.items() if k not in axes)))
    return out


def gpu_axes(env_file: Path, model: str) -> dict[str, str]:
    """The axes `configs/<model>.gpu.yml` sets, read as the guard reads them."""
    try:
        text = (env_file.parent / f"{model}.gpu.yml").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for key, _ in deploy.AXIS_KEYS:
        found = re.findall(rf"^{key}:[ \t]*[\"']?([0-9-]*)", text, re.MULTILINE)
        if found:
            out[key] = found[-1]
    return out


def prove(env_file: Path, text: Sequence[str], block: tuple[int, int], model: str,
          par: Parallelism, lines: Sequence[str], jobs: Sequence[Job]) -> str | None:
    """None when, sourced as each job would, the file leaves every setting of the recipe
    (`lines`, the block's body) in effect; else why not, one line, for the first job that
    misses one: the block never reached (the line that stopped the file), its guard
    reading another parallelism (an axis the gpu.yml leaves to -1), or what won."""
    want = deploy.settings_of_lines(lines)
    for job in jobs:
        try:
            got = source(env_file, job.passthrough).settings()
            error = ""
        except SourceError as e:
            got, error = (), str(e)
        have = {(s.layer is Layer.MAXTEXT, s.key): s.value for s in got}
        own = {a.partition("=")[0] for a in job.passthrough}
        missed = [s for s in want
                  if not (s.layer is Layer.MAXTEXT and s.key in own)
                  and have.get((s.layer is Layer.MAXTEXT, s.key)) != s.value]
        if missed:
            why = _why(env_file, text, block, model, par, job, missed, have, error)
            return f"for {job.name}, {why}"
    return None


def _why(env_file: Path, text: Sequence[str], block: tuple[int, int], model: str,
         par: Parallelism, job: Job, missed: Sequence[Setting],
         have: Mapping[tuple[bool, str], str], error: str) -> str:
    ran = lines_run(env_file, job.passthrough)
    if not any(block[0] < n - 1 < block[1] for n in ran):
        before = [n for n in ran if n - 1 < block[0]]
        if not before:
            return "the block is never reached: " + (error or "the file runs no command")
        n = before[-1]
        line = text[n - 1].strip()
        how = ("returns early" if re.search(r"\breturn\b", line) else
               "exits" if re.search(r"\bexit\b", line) else "is the last line that runs")
        return f"the block is never reached: line {n} ({line!r}) {how}"
    if error:
        return error
    read = _guard_reads(env_file, model, job)
    cell = deploy.axis_values(par)
    if read != cell:
        yml = gpu_axes(env_file, model)
        given = {a.partition("=")[0] for a in job.passthrough}
        auto = [k for k, v in yml.items() if v == "-1" and k not in given]
        if auto:
            k = auto[0]
            n = par.degree(dict((key, a) for key, a in deploy.AXIS_KEYS)[k])
            return (f"the block's guard skips it: configs/{model}.gpu.yml sets {k}: -1 "
                    f"(MaxText fills it from the job's devices), so the guard reads "
                    f"'{read}', not {par.text}'s '{cell}'; set {k}: {n} there, or pass "
                    f"{k}={n} with every job")
        return f"the block's guard reads the parallelism as '{read}', not {par.text}'s '{cell}'"
    s = missed[0]
    return (f"{s.label} is not in effect after the file "
            f"({have.get((s.layer is Layer.MAXTEXT, s.key), 'unset')} won)")


def _guard_reads(env_file: Path, model: str, job: Job) -> str:
    """The axes as the block's guard reads them for this job (override, else gpu.yml, else 1)."""
    yml = gpu_axes(env_file, model)
    out = []
    for key, _ in deploy.AXIS_KEYS:
        val = yml.get(key, "")
        for arg in job.passthrough:
            if arg.startswith(f"{key}="):
                val = arg.partition("=")[2]
        out.append(val or "1")
    return " ".join(out)
