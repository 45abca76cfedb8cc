"""What wins in a job's environment (xla-tuning-facts.md, "How settings reach a job"):
`train_env.sh` -> `configs/<model>.env.sh` (sourced after it) -> `_env_K=V` (re-exported
after both); where a profile's arm loses, and the job name its selector makes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.clusters.train_env.blocks import SELECTOR, Arm, TrainEnvError, remove_arms
from sweepd.util.jobname import JobNameTooLong, job_name

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)(\+?=)(.*)$")
_FLAG_IN = re.compile(r"--([A-Za-z][A-Za-z0-9_]*)=(\S+?)[\"']?(?=[\s\"']|$)")


@dataclass(frozen=True)
class Override:
    """A setting of the arm that the per-model env file also sets, after train_env.sh."""

    key: str          # the flag's name without dashes, or the env var
    xla: bool         # an XLA flag (else an env var)
    arm_value: str
    file_value: str


@dataclass(frozen=True)
class Placement:
    """Where a profile's settings win: the arm for train_env.sh, the passthrough args the
    submission carries (`_env_TUNE_PROFILE=<name>`, then `_env_K=V` for each env var the
    per-model file would override), and the XLA flags nothing in train_env.sh can win."""

    arm: Arm
    passthrough: tuple[str, ...]
    lost: tuple[Override, ...]


def env_file_settings(env_file: str) -> tuple[dict[str, str], dict[str, str]]:
    """(XLA flags appended, env vars set) by a per-model env file, last wins; comments skipped.
    A line continued with a trailing backslash is read with its continuation (the toolkit's
    llama3.1 env files export their XLA_FLAGS over several lines)."""
    flags: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in re.sub(r"\\\n", " ", env_file).splitlines():
        m = _ASSIGN.match(line.split(" #", 1)[0])
        if m is None:
            continue
        key, value = m.group(1), m.group(3).strip()
        if key == "XLA_FLAGS":
            flags.update(_FLAG_IN.findall(value))
        else:
            env[key] = value.strip("\"'")
    return flags, env


def overrides(env_file: str, a: Arm) -> tuple[Override, ...]:
    """The arm's settings the per-model env file sets too: there the file wins (sourced later)."""
    flags, env = env_file_settings(env_file)
    out = []
    for flag in a.xla_flags:
        key, _, value = flag.lstrip("-").partition("=")
        if key in flags:
            out.append(Override(key, True, value, flags[key]))
    out += [Override(k, False, v, env[k]) for k, v in a.env if k in env]
    return tuple(out)


def placement(a: Arm, env_file: str | None) -> Placement:
    """The arm for train_env.sh and the passthrough that makes the rest win: an env var the
    per-model file sets is also passed as `_env_K=V` (re-exported after the file)."""
    found = overrides(env_file, a) if env_file else ()
    passthrough = [selector(a.name)]
    passthrough += [f"_env_{o.key}={o.arm_value}" for o in found if not o.xla]
    return Placement(a, tuple(passthrough), tuple(o for o in found if o.xla))


def read_early(train_env: str, a: Arm) -> tuple[str, ...]:
    """The arm's env vars that train_env.sh itself reads (outside sweepd's blocks), such as
    `ENABLE_XLA_DUMP`: the file decides on them before the post-NCCL block exports the arm's
    value, so they must also be passed as `_env_K=V` (pre-exported before the file)."""
    rest = remove_arms(train_env)
    return tuple(k for k, _ in a.env
                 if re.search(rf"\$\{{?{k}\b|\[{k}\]", rest) is not None)


def selector(name: str) -> str:
    return f"_env_{SELECTOR}={name}"


def job_name_for(model: str, tag: str | None, passthrough: Sequence[str]) -> str:
    """The job name submit.sh will build (passthrough appended to the tag), checked against
    the 243-byte limit with an error that names the profile selector's share."""
    try:
        return job_name(model, tag, passthrough)
    except JobNameTooLong as exc:
        profile = next((p for p in passthrough if p.startswith(f"_env_{SELECTOR}=")), None)
        hint = f"; shorten the profile's name ({profile})" if profile else ""
        raise TrainEnvError(f"{exc}{hint}") from exc
