"""The one accelerator slot of this machine, shared by every sweepd process that runs jobs
on it with the local backend (a daemon, a `sweepd run`, a `check --job`), whatever their
state directories: an flock on one lock file per machine (`[cluster.local] lock`, default
`/tmp/sweepd-local-<node>.lock`, group read-write).

The scheduler that starts a job takes the lock and hands its open file to the job's wrapper,
which hands it on to the trainer: the lock is held while either runs, so a daemon restarted
(or crashed, or a `run` killed) does not free the slot while its trainer still runs, and
the kernel releases it when both have ended; nothing is left held when a process dies. The
holder is written into the lock file (pid, state dir, sweep, job) so the one that waits can
say for whom."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

MODE = 0o660   # the group's sweepd processes share the slot


def open_lock(path: Path) -> int:
    """The lock file's descriptor, read-write where allowed (to say who holds it), else
    read-only (flock needs no more). An existing file is opened without O_CREAT: in a
    sticky world-writable directory (/tmp) the kernel may refuse O_CREAT on another user's
    file (fs.protected_regular). OSError: it cannot be opened at all."""
    for flags in (os.O_RDWR, os.O_RDONLY):
        try:
            return os.open(path, flags | os.O_CLOEXEC)
        except FileNotFoundError:
            break
        except PermissionError:
            continue
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, MODE)
    except FileExistsError:   # another process made it meanwhile
        return open_lock(path)
    with contextlib.suppress(OSError):
        os.fchmod(fd, MODE)   # past the umask: the group may write who holds it
    return fd


def try_take(path: Path) -> int | None:
    """The lock's descriptor, held (the caller closes it once it has handed it on), or None
    when another process holds it."""
    fd = open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_holder(fd: int, holder: dict[str, Any]) -> None:
    """Who holds the slot, into the lock file itself (in place: a new file would be a new
    lock). A read-only descriptor leaves it unsaid."""
    data = (json.dumps(holder, sort_keys=True) + "\n").encode()
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


def holder_text(holder: Any) -> str:
    """`pid P (state dir D, sweep S, job J)` from what the holder wrote."""
    if not isinstance(holder, dict) or not holder.get("pid"):
        return "another process (it did not say who)"
    parts = [f"state dir {holder['state_dir']}" if holder.get("state_dir") else None,
             f"sweep {holder['sweep']}" if holder.get("sweep") else None,
             f"job {holder['job']}" if holder.get("job") else None]
    said = ", ".join(p for p in parts if p)
    return f"pid {holder['pid']}" + (f" ({said})" if said else "")


def who_holds(path: Path) -> str:
    try:
        holder = json.loads(path.read_text("utf-8") or "null")
    except (OSError, ValueError):
        holder = None
    return holder_text(holder)


def lock_problem(path: Path) -> str | None:
    """Why this process could not take part in the slot (the lock file cannot be opened or
    made), for `sweepd check` and a start; None when it can."""
    try:
        os.close(open_lock(path))
    except OSError as e:
        return (f"cluster.local.lock: {path} cannot be opened or made ({e.strerror or e}): "
                "set [cluster.local] lock to a file every sweepd on this machine can open")
    return None
