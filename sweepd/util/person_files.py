"""Edits of the person's own files (their checkout's `train_env.sh`, `configs/<model>.env.sh`,
`configs/<model>.gpu.yml`, `<MODEL_TAG>-tuning.md`): the one way sweepd writes into them.

A person's editor takes no lock, and their file is theirs: its owner, mode, inode and hard
links are not sweepd's to change. So every edit here

* refuses in one line what is not a regular file (a FIFO or device hangs the read or is
  written through; a link loop reaches no file) and, asked (`force=False`), a read-only one;
* reads the file, computes the new text from it and checks the new text parses (`bash -n`
  for shell, a YAML load for YAML) before anything is written;
* opens the file for writing, takes an advisory lock on it (`fcntl.flock`, so two sweepd
  processes never interleave; no lock file is left in the checkout), then re-reads it
  through that descriptor: the path must still name it and content, size and mtime must be
  what the new text was computed from, else the edit starts again from the file as it is
  now (a bounded number of times, then one line refuses it);
* reserves the room for a longer text before a byte changes (`posix_fallocate`: a full disk
  refuses with the file untouched), writes in place (same inode: owner, mode, links stay)
  and on any write error puts the old content back;
* checks after the write that the path still names the inode written (an editor's atomic
  save, temp file + rename, would leave sweepd's text in the file they replaced): if not,
  that inode gets its old content back and the edit starts again from their file; and that
  the result parses, putting the old content back if not.

An editor takes no lock, so the last look and the write are made under a write lease on
Linux (`F_SETLEASE`: nobody can open the file meanwhile; their open waits the microseconds
until sweepd is done). Where a lease cannot be had (another process holds the file open, a
file system without leases, a file sweepd's user does not own) an editor that writes
between the last look and the write, one system call apart, would lose that write. An
editor that saves after sweepd's write keeps its own text: the person's choice.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from sweepd.util import read_only

ATTEMPTS = 5
LEASE_TRIES = 20
# Errors of a reservation that say the space is not there (the others: not supported).
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
OPEN_FLAGS = os.O_NONBLOCK | os.O_NOCTTY  # a FIFO or tty swapped in never blocks the open


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
         attempts: int = ATTEMPTS, force: bool | None = None) -> Edit:
    """Apply `change` (old text, None when absent, -> new text) to the person's file safely
    (see the module). `check` defaults to the file's kind. `create`: a missing file is
    created (mode 0644 under the umask), else refused. `force`: False refuses a read-only
    file (no owner write bit) in one line, True writes it anyway, None (the default) leaves
    that to the caller. Raises PersonFileError (one line) or whatever `change` raises; the
    file is then as it was."""
    target = _target(path)
    check = check if check is not None else checker_for(target)
    for attempt in range(1, attempts + 1):
        old, stamp = _read(target)
        if old is None and not create:
            raise PersonFileError(f"cannot read {path}: no such file")
        if old is not None and force is False:
            refuse_read_only(path)
        new = change(old)
        if new == old:
            return Edit(path, old, new, attempt)
        if check is not None:
            try:
                check(new)
            except PersonFileError as e:
                raise PersonFileError(f"{path} {e}") from None
        try:
            if old is None:
                _create(target, new)
            else:
                _rewrite(target, old, stamp, new, check, path if force is False else None)
        except _Changed:
            continue
        return Edit(path, old, new, attempt)
    raise PersonFileError(f"{path} kept changing while sweepd tried to write it ({attempts} "
                          "tries); nothing written: try again when it is not being edited")


def refuse_read_only(path: Path, mode: int | None = None) -> None:
    """PersonFileError when the file (a link followed) has no owner write bit
    (`read_only.refusal`). `mode`: the one already looked at."""
    why = read_only.refusal(path, mode=mode)
    if why is not None:
        raise PersonFileError(why)


def _target(path: Path) -> Path:
    try:
        return path.resolve() if path.is_symlink() else path
    except RuntimeError:  # Python before 3.13: a symbolic link loop
        raise PersonFileError(f"{path} is a symbolic link loop (it never reaches a file): "
                              "nothing written") from None


def _regular(path: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
            stat.S_IFBLK: "block device", stat.S_IFDIR: "directory"}.get(
                stat.S_IFMT(st.st_mode), "special file")
    raise PersonFileError(f"{path} is a {kind}, not a regular file: sweepd edits only "
                          "regular files; nothing written")


def _read(path: Path) -> tuple[str | None, tuple[int, int, int] | None]:
    try:
        _regular(path, os.stat(path))  # before an open that a FIFO or device would hang
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        raise PersonFileError(f"cannot read {path}: {e.strerror}") from None
    try:
        _regular(path, os.fstat(fd))  # swapped in between the look and the open
        data = _read_all(fd)
        st = os.fstat(fd)
    except OSError as e:
        raise PersonFileError(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8"), _stamp(st)
    except UnicodeDecodeError:
        raise PersonFileError(f"{path} is not UTF-8 text; sweepd will not edit it") from None


def _read_all(fd: int) -> bytes:
    chunks, at = [], 0
    while chunk := os.pread(fd, 1 << 20, at):
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


def _create(path: Path, new: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOCTTY, 0o644)
    except FileExistsError:
        raise _Changed from None
    except OSError as e:
        raise PersonFileError(f"cannot create {path}: {e.strerror}") from None
    try:
        _overwrite(fd, new.encode("utf-8"))
    except OSError as e:
        if _at_path(fd, path):  # never leave a cut-short file of sweepd's own
            path.unlink(missing_ok=True)
        raise PersonFileError(f"cannot create {path}: {e.strerror}; nothing written") from None
    finally:
        os.close(fd)


def _rewrite(path: Path, old: str, stamp: tuple[int, int, int] | None, new: str,
             check: Check | None, read_only_refused: Path | None) -> None:
    try:
        fd = os.open(path, os.O_RDWR | OPEN_FLAGS)
    except FileNotFoundError:
        raise _Changed from None
    except OSError as e:
        raise PersonFileError(f"cannot write {path}: {e.strerror}") from None
    try:
        _regular(path, os.fstat(fd))
        fcntl.flock(fd, fcntl.LOCK_EX)  # another sweepd process waits here
        if read_only_refused is not None:
            refuse_read_only(read_only_refused, os.fstat(fd).st_mode)
        leased = _lease(fd)
        try:
            _check_and_put(fd, path, old, stamp, new, check)
        finally:
            if leased:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    finally:
        os.close(fd)


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


def _check_and_put(fd: int, path: Path, old: str, stamp: tuple[int, int, int] | None,
                   new: str, check: Check | None) -> None:
    # The last look, through the descriptor that writes: anything saved since the
    # new text was computed makes it start again from the file as it is now. A lease
    # holds off opens, not renames: an editor's atomic save is seen by the path alone.
    before = old.encode("utf-8")
    if (not _at_path(fd, path) or _stamp(os.fstat(fd)) != stamp
            or _read_all(fd) != before):
        raise _Changed
    _put(fd, path, new.encode("utf-8"), before)
    if not _at_path(fd, path):
        # Replaced while sweepd wrote: its text went to the file the person's editor
        # replaced (still theirs through any hard link), so that gets its old content back.
        _put_back(fd, path, before, "the file was replaced while sweepd wrote it")
        raise _Changed
    written = _read_all(fd).decode("utf-8", errors="replace")
    if check is not None and written == new:
        try:
            check(written)
        except PersonFileError:
            _put_back(fd, path, before, "the result does not parse")
            raise


def _at_path(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open on `fd`."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _put(fd: int, path: Path, data: bytes, old: bytes) -> None:
    """`data` in place of `old`: the file is never left cut short or half written."""
    if len(data) > len(old) and hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, len(data))
        except OSError as e:
            if e.errno in NO_SPACE:
                if os.fstat(fd).st_size != len(old):
                    os.ftruncate(fd, len(old))
                raise PersonFileError(f"cannot write {path}: {e.strerror} (no room for "
                                      f"{len(data)} bytes); nothing written, the file is "
                                      "as it was") from None
            # Not supported here: the write goes on, any failure puts the old text back.
    try:
        _overwrite(fd, data)
    except OSError as e:
        _put_back(fd, path, old, f"cannot write {path}: {e.strerror}")
        raise PersonFileError(f"cannot write {path}: {e.strerror}; nothing written, the "
                              "old content is back") from None


def _put_back(fd: int, path: Path, old: bytes, why: str) -> None:
    try:
        _overwrite(fd, old)
    except OSError as e:
        raise PersonFileError(f"{why}, and putting its old content back failed "
                              f"({e.strerror}): restore {path} by hand") from None


def _overwrite(fd: int, data: bytes) -> None:
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
