"""Edits of the person's own files (their checkout's `train_env.sh`, `configs/<model>.env.sh`,
`configs/<model>.gpu.yml`, `<MODEL_TAG>-tuning.md`): the one way sweepd writes into them.

A person's editor takes no lock, and their file is theirs: its owner, mode, inode and hard
links are not sweepd's to change. So every edit here

* reads the file, computes the new text from it and checks the new text parses (`bash -n`
  for shell, a YAML load for YAML) before anything is written;
* opens the file for writing, takes an advisory lock on it (`fcntl.flock`, so two sweepd
  processes never interleave; no lock file is left in the checkout), then re-reads it
  through that descriptor: content, size and mtime must be what the new text was computed
  from, else the edit starts again from the new content (a bounded number of times, then
  one line refuses it);
* writes in place (the same inode: `r+`, write, truncate, fsync), so owner, mode, inode and
  links stay, and checks the result parses, putting the old content back if not.

An editor takes no lock, so the last look and the write are made under a write lease on
Linux (`F_SETLEASE`: nobody can open the file meanwhile; their open waits the microseconds
until sweepd is done). Where a lease cannot be had (another process holds the file open, a
file system without leases, a file sweepd's user does not own) an editor that writes
between the last look and the write, one system call apart, would lose that write. An
editor that saves after sweepd's write keeps its own text: the person's choice.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import yaml

ATTEMPTS = 5
LEASE_TRIES = 20


class PersonFileError(ValueError):
    """One line: why the person's file was not written (nothing was changed)."""


class _Changed(Exception):
    pass


@dataclass(frozen=True)
class Edit:
    path: Path
    old: str | None  # None: the file did not exist
    new: str
    attempts: int  # 1: written at the first try; more: the file changed under us

    @property
    def changed(self) -> bool:
        return self.old != self.new


Change = Callable[[str | None], str]
Check = Callable[[str], None]


def bash_syntax(text: str) -> None:
    """`bash -n` on the text (skipped where bash is missing): every job sources it."""
    bash = shutil.which("bash")
    if bash is None:
        return
    res = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True,
                         timeout=30, check=False)
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        raise PersonFileError("would not parse, nothing written: "
                              + ("; ".join(lines) or "bash -n failed"))


def yaml_syntax(text: str) -> None:
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PersonFileError("would not parse as YAML, nothing written: "
                              + " ".join(str(e).split())) from None


def checker_for(path: Path) -> Check | None:
    """The parse check a file's name asks for (shell, YAML; none for markdown)."""
    if path.name.endswith(".sh"):
        return bash_syntax
    if path.name.endswith((".yml", ".yaml")):
        return yaml_syntax
    return None


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


def edit(path: Path, change: Change, *, check: Check | None = None, create: bool = False,
         attempts: int = ATTEMPTS) -> Edit:
    """Apply `change` (old text, None when absent, -> new text) to the person's file safely
    (see the module). `check` defaults to the file's kind. `create`: a missing file is
    created (mode 0644 under the umask), else refused. Raises PersonFileError (one line) or
    whatever `change` raises; the file is then as it was."""
    target = path.resolve() if path.is_symlink() else path
    check = check if check is not None else checker_for(target)
    for attempt in range(1, attempts + 1):
        old, stamp = _read(target)
        if old is None and not create:
            raise PersonFileError(f"cannot read {path}: no such file")
        new = change(old)
        if new == old:
            return Edit(path, old, new, attempt)
        if check is not None:
            try:
                check(new)
            except PersonFileError as e:
                raise PersonFileError(f"{path} {e}") from None
        try:
            _write(target, old, stamp, new, check)
        except _Changed:
            continue
        return Edit(path, old, new, attempt)
    raise PersonFileError(f"{path} kept changing while sweepd tried to write it ({attempts} "
                          "tries); nothing written: try again when it is not being edited")


def _read(path: Path) -> tuple[str | None, tuple[int, int, int] | None]:
    try:
        with path.open("rb") as fh:
            data = fh.read()
            st = os.fstat(fh.fileno())
    except FileNotFoundError:
        return None, None
    except OSError as e:
        raise PersonFileError(f"cannot read {path}: {e.strerror}") from None
    try:
        return data.decode("utf-8"), _stamp(st)
    except UnicodeDecodeError:
        raise PersonFileError(f"{path} is not UTF-8 text; sweepd will not edit it") from None


def _write(path: Path, old: str | None, stamp: tuple[int, int, int] | None, new: str,
           check: Check | None) -> None:
    if old is None:
        _create(path, new)
    else:
        _rewrite(path, old, stamp, new, check)


def _create(path: Path, new: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise _Changed from None
    except OSError as e:
        raise PersonFileError(f"cannot create {path}: {e.strerror}") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(new.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def _rewrite(path: Path, old: str, stamp: tuple[int, int, int] | None, new: str,
             check: Check | None) -> None:
    try:
        fh = path.open("r+b")
    except FileNotFoundError:
        raise _Changed from None
    except OSError as e:
        raise PersonFileError(f"cannot write {path}: {e.strerror}") from None
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # another sweepd process waits here
        leased = _lease(fh.fileno())
        try:
            _check_and_put(fh, path, old, stamp, new, check)
        finally:
            if leased:
                fcntl.fcntl(fh.fileno(), fcntl.F_SETLEASE, fcntl.F_UNLCK)


def _lease(fd: int) -> bool:
    """A write lease on the file (Linux): while sweepd holds it nobody can open the file (an
    editor's open waits until it is released, microseconds later), which closes the window
    between the last look and the write. Only when no other process has the file open, and
    only for its owner (or with CAP_LEASE): otherwise the edit goes on without it. The lease
    break signal is SIGURG, whose default is to be ignored."""
    if not hasattr(fcntl, "F_SETLEASE"):
        return False
    for _ in range(LEASE_TRIES):
        try:
            fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
            return True
        except BlockingIOError:
            time.sleep(0.01)  # another process has it open right now
        except OSError:
            return False  # not the owner, or a file system without leases
    return False


def _check_and_put(fh: BinaryIO, path: Path, old: str, stamp: tuple[int, int, int] | None,
                   new: str, check: Check | None) -> None:
    # The last look, through the descriptor that writes: anything saved since the
    # new text was computed makes it start again from the file as it is now.
    if _stamp(os.fstat(fh.fileno())) != stamp or fh.read() != old.encode("utf-8"):
        raise _Changed
    _put(fh, new)
    fh.seek(0)
    written = fh.read().decode("utf-8", errors="replace")
    if check is not None and written == new:
        try:
            check(written)
        except PersonFileError:
            _put(fh, old)  # never leave the person a file that does not parse
            raise


def _put(fh: BinaryIO, text: str) -> None:
    fh.seek(0)
    fh.write(text.encode("utf-8"))
    fh.truncate()
    fh.flush()
    os.fsync(fh.fileno())
