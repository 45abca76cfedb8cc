"""The files: sweepd's own (written at once) and the person's `train_env.sh` (edited in
place through `util.person_files`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from sweepd.clusters.train_env.blocks import (
    Arm,
    TrainEnvError,
    add_arm,
    arms,
    describe,
    remove_arms,
    without_arms,
)
from sweepd.util import person_files


def write_atomic(path: Path, text: str) -> None:
    """Replace the file's content at once (temp file + rename beside it), keeping its mode;
    a symlink is followed, so the link stays."""
    target = path.resolve()
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".sweepd", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _edit(path: Path, change: Callable[[str], str]) -> bool:
    """The person's file, changed through `util.person_files` (locked, re-checked right
    before the write, written in place so owner, mode, inode and links stay, left parsing)."""
    def whole(old: str | None) -> str:
        if old is None:
            raise TrainEnvError(f"cannot read {path}: no such file")
        return change(old)

    try:
        return person_files.edit(path, whole, check=person_files.bash_syntax).changed
    except person_files.PersonFileError as e:
        raise TrainEnvError(str(e)) from None


def apply(path: Path, a: Arm) -> bool:
    """Add the arm to the file; True when the file changed (False: the arm was there)."""
    return _edit(path, lambda text: add_arm(text, a))


def clean(path: Path) -> bool:
    """Remove sweepd's blocks from the file (offered to the person, never done unasked)."""
    return _edit(path, remove_arms)


def remove(path: Path, names: Sequence[str]) -> tuple[Arm, ...]:
    """Remove the named arms (a sweep's own, at its end) from the file, and both blocks once
    no arm is left; the arms removed (none: the file was not changed). Refused, nothing
    written, when the file changed while it was read or its blocks were edited by hand."""
    removed: list[Arm] = []

    def change(text: str) -> str:
        removed[:] = [a for a in arms(text) if a.name in set(names)]
        return without_arms(text, names)

    _edit(path, change)
    return tuple(removed)


def leftover(path: Path) -> str:
    return describe(path.read_text(encoding="utf-8"), str(path))
