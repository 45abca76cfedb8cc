"""A person's file made read-only is not written without `--force` (both kinds' `report
--apply`): sweepd may run as root, who can write a file its owner made read-only, and that
mode is the person's word that the file is not to be changed."""

from __future__ import annotations

import stat
from pathlib import Path


def refusal(path: Path, force: bool = False, mode: int | None = None) -> str | None:
    """Why `path` is not written (one line), or None: it is writable by its owner, missing,
    or `force` is given. `mode`: the one already looked at (on the open file)."""
    if force:
        return None
    try:
        real = path.resolve()
        mode = real.stat().st_mode if mode is None else mode
    except (OSError, RuntimeError):
        return None  # missing, a link loop, unreadable: the edit itself says why
    if mode & stat.S_IWUSR:
        return None
    link = f" (a link to {real})" if path.is_symlink() else ""
    return (f"{path}{link} is read-only (mode {stat.S_IMODE(mode):04o}): nothing written; "
            "make it writable, or add --force to write it anyway")
