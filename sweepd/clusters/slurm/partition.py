"""A partition named in the config or a spec, against the ones the scheduler has: checked by
`check` and `validate` (and at submit) so that a typo is one line before any sweep, not a
refusal at its first submission."""

from __future__ import annotations

from collections.abc import Sequence


def partition_problem(partition: str, known: Sequence[str]) -> str | None:
    """Why `partition` cannot take jobs (None: it exists). `known` as
    `Queries.partitions` gives them (`NAME (default)` for the default one)."""
    names = {k.removesuffix(" (default)") for k in known}
    if partition in names:
        return None
    have = ", ".join(known) or "none"
    return f"partition {partition!r} does not exist on this cluster; its partitions: {have}"
