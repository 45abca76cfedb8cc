"""Job names as maxtext-slurm's submit.sh builds them (maxtext-slurm-facts.md §1)."""

from __future__ import annotations

from collections.abc import Sequence

# ext4's 255-byte path segment minus the `<jobid>-` prefix and `.log` suffix.
MAX_JOB_NAME_BYTES = 243


class JobNameTooLong(ValueError):
    pass


def passthrough_part(arg: str) -> str:
    """`--foo=bar` -> `foo_bar`: leading dashes stripped, `=` -> `_`."""
    return arg.lstrip("-").replace("=", "_")


def job_name(model: str, tag: str | None = None, passthrough: Sequence[str] = ()) -> str:
    """`JAX-<model>[-<tag>]`, with passthrough args appended to the tag."""
    parts = [p for p in [tag or "", *(passthrough_part(a) for a in passthrough)] if p]
    name = f"JAX-{model}" + (f"-{'-'.join(parts)}" if parts else "")
    if len(name.encode()) > MAX_JOB_NAME_BYTES:
        raise JobNameTooLong(
            f"job name is {len(name.encode())} bytes, over the {MAX_JOB_NAME_BYTES}-byte limit "
            f"(ext4 path segment minus the job-id prefix): shorten the tag or overrides"
        )
    return name


def split_model_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`model[[:alias]:tag]` peeled right to left -> (model, alias, tag)."""
    parts = spec.split(":")
    if len(parts) > 3:
        raise ValueError(f"{spec!r}: too many ':' separators")
    model = parts[0]
    tag = parts[-1] if len(parts) >= 2 else None
    alias = parts[1] if len(parts) == 3 else None
    return model, alias or None, tag or None
