"""A submission's guard file, so a restarted daemon can tell whether an earlier daemon's
submitting command (`sbatch`, `./submit.sh`, or an ssh to them) is still running.

The submitter opens `<output_dir>/.sweepd-<token>.submitting`, takes an exclusive flock and
hands the open file to the command it starts (and so to everything that starts): the lock
outlives a killed daemon for exactly as long as one of those processes lives. The file
holds the command's process group id, so the group can be ended once its deadline passed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path


def guard_path(output_dir: Path, token: str) -> Path:
    return output_dir / f".sweepd-{token}.submitting"


class GuardHeld(RuntimeError):
    """An earlier submitter of the same token still runs."""


@contextlib.contextmanager
def hold(path: Path) -> Iterator[int]:
    """Hold the guard while submitting; yields the descriptor to pass to the command."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GuardHeld(f"an earlier submission of {path.name} is still running") from None
        os.ftruncate(fd, 0)
        yield fd
        path.unlink(missing_ok=True)   # while still locked: nobody else can be using it
    finally:
        os.close(fd)


def record_group(fd: int, pgid: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(pgid).encode(), 0)


def holder(path: Path) -> int | None:
    """None when no process holds the guard (or there is none); else the process group of
    the submitter holding it (0 when a crash came before it was written)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def end_group(pgid: int) -> None:
    """SIGKILL a submitter's process group (it outlived its deadline)."""
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
