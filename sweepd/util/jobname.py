"""Job names as maxtext-slurm's submit.sh builds them (maxtext-slurm-facts.md §1), and
which of a job's MaxText overrides must leave the name for it to fit the toolkit's limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# ext4's 255-byte path segment minus the `<jobid>-` prefix and `.log` suffix.
MAX_JOB_NAME_BYTES = 243
# MaxText overrides that must stay on the command line: the toolkit reads
# `enable_checkpointing=true` from the job name to pick the output directory
# (maxtext-slurm docs/job-submission.md, "Why CLI, not YAML").
NAME_BOUND = frozenset({"enable_checkpointing"})


class JobNameTooLong(ValueError):
    pass


def passthrough_part(arg: str) -> str:
    """`--foo=bar` -> `foo_bar`: leading dashes stripped, `=` -> `_`."""
    return arg.lstrip("-").replace("=", "_")


def build_name(model: str, tag: str | None = None, passthrough: Sequence[str] = ()) -> str:
    """`JAX-<model>[-<tag>]`, with passthrough args appended to the tag (no length check)."""
    parts = [p for p in [tag or "", *(passthrough_part(a) for a in passthrough)] if p]
    return f"JAX-{model}" + (f"-{'-'.join(parts)}" if parts else "")


def file_segment(name: str) -> str:
    """A job name as one segment of a file name (`<jobid>-<name>.log`, the job's directory):
    a `/` in a passthrough value (a path: the evidence run's `--xla_dump_to=/...`) would make
    the log a file in directories nobody made (seen on the TPU chip: the log landed nine
    folders down), so it reads `_` there; the name itself is kept as the job's."""
    return name.replace("/", "_")


def name_bytes(name: str) -> int:
    return len(name.encode())


def job_name(model: str, tag: str | None = None, passthrough: Sequence[str] = ()) -> str:
    """`JAX-<model>[-<tag>]`, with passthrough args appended to the tag."""
    name = build_name(model, tag, passthrough)
    if name_bytes(name) > MAX_JOB_NAME_BYTES:
        raise JobNameTooLong(
            f"job name is {name_bytes(name)} bytes, over the {MAX_JOB_NAME_BYTES}-byte limit "
            f"(ext4 path segment minus the job-id prefix): shorten the tag or overrides"
        )
    return name


def carriable(arg: str) -> bool:
    """A MaxText `key=value` override: it can ride in a config file instead of the name.
    `_env_K=V` cannot (the toolkit exports only passthrough env), nor a name-bound key."""
    key, eq, _ = arg.partition("=")
    return bool(eq) and not key.startswith(("_env_", "-")) and key not in NAME_BOUND


@dataclass(frozen=True)
class Fitted:
    """A job's name, the passthrough args that stay in it, and the MaxText overrides that
    leave it (carried another way: never dropped)."""

    name: str
    named: tuple[str, ...]
    carried: tuple[str, ...]

    @property
    def note(self) -> str | None:
        if not self.carried:
            return None
        return (f"job name without {', '.join(self.carried)} "
                f"(with them it would be over {MAX_JOB_NAME_BYTES} bytes)")


def fit(model: str, tag: str | None, passthrough: Sequence[str], *, prefix_len: int = 0
        ) -> Fitted:
    """The name with as many passthrough args as fit: MaxText overrides leave it, longest
    first, until it is at most the limit (`prefix_len`: bytes the caller adds to the model
    part, e.g. a config name's suffix). Raises JobNameTooLong naming what cannot be
    carried when even without every carriable override it is too long."""
    args = list(passthrough)
    name = build_name(model, tag, args)
    if name_bytes(name) + prefix_len <= MAX_JOB_NAME_BYTES:
        return Fitted(name, tuple(args), ())
    carried: list[str] = []
    for arg in sorted((a for a in args if carriable(a)), key=lambda a: -len(a.encode())):
        carried.append(arg)
        kept = [a for a in args if a not in carried]
        name = build_name(model, tag, kept)
        if name_bytes(name) + prefix_len <= MAX_JOB_NAME_BYTES:
            return Fitted(name, tuple(kept), tuple(a for a in args if a in carried))
    stuck = [a for a in args if not carriable(a)]
    raise JobNameTooLong(
        f"job name is {name_bytes(build_name(model, tag, args)) + prefix_len} bytes, over the "
        f"{MAX_JOB_NAME_BYTES}-byte limit (ext4 path segment minus the job-id prefix), and "
        f"still {name_bytes(name) + prefix_len} bytes with every MaxText override carried "
        "outside it; what cannot be carried: "
        + (", ".join(f"{a.partition('=')[0]} ({len(passthrough_part(a).encode()) + 1} bytes)"
                     for a in stuck) if stuck else "the model and tag")
        + " (env settings and enable_checkpointing ride in the name): shorten them")


def split_model_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`model[[:alias]:tag]` peeled right to left -> (model, alias, tag)."""
    parts = spec.split(":")
    if len(parts) > 3:
        raise ValueError(f"{spec!r}: too many ':' separators")
    model = parts[0]
    tag = parts[-1] if len(parts) >= 2 else None
    alias = parts[1] if len(parts) == 3 else None
    return model, alias or None, tag or None
