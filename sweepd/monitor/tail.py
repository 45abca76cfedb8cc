"""Incremental reader of one job log: complete new lines since the last call.

`offset` and `identity` are plain attributes so the engine can persist them and resume
after a daemon restart without reading a log twice. Memory is bounded by `chunk_bytes`
per call, whatever the log's size: a caller that wants everything calls again while
`has_more` is true.

A log deleted (or shadowed by a directory) while the job runs is still the file the job
writes to: once open, it is read through its descriptor to the end. A log that cannot be
read at all is `lost` (with why); silence then says nothing about the job.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import BinaryIO

# A stored identity with this prefix: the log could not be read when it was last tried.
LOST = "lost|"
# Why a log never seen is unreadable: not there (yet). A job's log appears some time after
# the scheduler says RUNNING (a slow start, a shared file system's delay).
NOT_THERE = "no log file"


def is_lost(identity: str | None) -> bool:
    return identity is not None and identity.startswith(LOST)


class LogTailer:
    def __init__(
        self,
        path: Path,
        offset: int = 0,
        identity: str | None = None,
        chunk_bytes: int = 1 << 20,
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be positive")
        self.path = path
        self._path = os.fspath(path)       # what `os.stat` takes without converting it
        self.offset = offset               # first byte not yet returned
        # Why the log cannot be read now (None: it can); restored from a stored identity.
        self.lost: str | None = "not readable when last tried" if is_lost(identity) else None
        # Why the path no longer shows the file being read through its descriptor.
        self.detached: str | None = None
        if is_lost(identity):
            identity = (identity or "")[len(LOST):] or None
        self.identity = identity           # "dev:ino" of the file `offset` belongs to
        self.chunk_bytes = chunk_bytes
        self.restarts = 0                  # times the file was truncated or replaced
        self.restart_reason: str | None = None   # "truncated" / "replaced", last restart
        self.has_more = False              # bytes beyond `offset` were left for next call
        self.last_read_bytes = 0           # bytes read from disk by the last call
        self.reads = 0                     # calls that read the file (it had grown)
        self.mtime: float | None = None    # the file's mtime when last looked at
        self._sync_file: BinaryIO | None = None
        self._sync_identity: str | None = None
        # (st_dev, st_ino) of the open file: a stat that shows it needs no identity check.
        self._sync_key: tuple[int, int] | None = None
        # A file was opened for reading (the first, or another: the log was replaced) since
        # the owner last cleared this: the follower watches it for writes (`monitor/watch`).
        self.opened_anew = False
        # (size, mtime in ns, inode, device) the path showed when the last read left nothing
        # to read (every complete line returned; at most a partial one waits for its
        # newline): a stat that shows the same again is the whole of the next call.
        self._settled: tuple[int, int, int, int] | None = None
        # What the path showed to the last usual call, as `_settled` keeps it (a tuple of
        # ints, not the stat result: one kept per log, and the collector skips those).
        self._looked: tuple[int, int, int, int] | None = None
        self.stats = 0                     # calls that looked at the log (one stat each)
        # The last call's stat showed the log as the last read left it: nothing was done.
        self.unchanged = False

    async def read_lines(self) -> list[tuple[int, str]]:
        """(byte offset where the line starts, line without CR/LF), for complete lines."""
        return await asyncio.to_thread(self.read_lines_sync)

    def read_lines_sync(self) -> list[tuple[int, str]]:
        """`read_lines` for a worker thread; the engine reads every due log in one such
        thread call per pass (a thread hop per log cost more than the reads)."""
        self.last_read_bytes = 0
        self.has_more = False
        self.stats += 1
        self.unchanged = False
        if self._settled is not None:
            # The usual call at scale (thousands of logs, most unchanged since the last
            # pass): one stat, compared with what the last read left, and nothing else.
            try:
                st = os.stat(self._path)
            except OSError:
                st = None
            key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) if st else None
            if key == self._settled:
                self.unchanged = True
                return []
            self._settled = None
            if (st is not None and (st.st_dev, st.st_ino) == self._sync_key
                    and st.st_size >= self.offset):
                # The next most usual: the file open for reading grew (`_open_size`'s
                # first case, inline; settled, it was neither lost nor detached).
                self.mtime, self._looked = st.st_mtime, key
                size: int | None = st.st_size
            else:
                size = self._open_size(st)
        else:
            size = self._open_size()
        if size is None or self._sync_file is None:
            return []
        if size > self.offset:
            self.reads += 1
            # One positioned read of what the size says is there (no seek, and no buffer of
            # `chunk_bytes` allocated for the usual line or two): thousands of logs a pass.
            data = os.pread(self._sync_file.fileno(),
                            min(self.chunk_bytes, size - self.offset), self.offset)
            self.last_read_bytes = len(data)
            lines = self._split(data)
            self.has_more = len(data) == self.chunk_bytes and size > self.offset
        else:
            lines = []
        if self._looked is not None and not self.has_more and self.detached is None:
            # Nothing left to read but a partial line: until the path shows another size,
            # time or file, neither the read nor the checks are made again (a log whose
            # writer flushes in blocks ends mid-line most of the time).
            self._settled = self._looked
        return lines

    @property
    def stored_identity(self) -> str | None:
        """`identity` as the store keeps it: marked when the log is lost."""
        return f"{LOST}{self.identity or ''}" if self.lost else self.identity

    def _open_size(self, looked: os.stat_result | None = None) -> int | None:
        """The size of the log, with it open for reading; None: nothing to read. `looked`:
        the path's stat, already made by the caller (None: made here)."""
        self._looked = None
        try:
            st = looked if looked is not None else os.stat(self._path)
        except FileNotFoundError:
            return self._unreachable("deleted" if self.identity else NOT_THERE)
        except OSError as e:
            return self._unreachable(f"cannot be read: {e.strerror}")
        if not stat.S_ISREG(st.st_mode):
            return self._unreachable("not a regular file")
        if (st.st_dev, st.st_ino) == self._sync_key and st.st_size >= self.offset:
            # The file open for reading, grown or not: nothing to check (the usual case).
            self.lost = self.detached = None
            self.mtime = st.st_mtime
            self._looked = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
            return st.st_size
        self._check_identity(f"{st.st_dev}:{st.st_ino}", st.st_size)
        if self._sync_file is None or self._sync_identity != self.identity:
            self._close_sync()
            try:
                f = open(self.path, "rb")  # noqa: SIM115 (kept open between reads)
            except OSError as e:
                return self._unreachable(f"cannot be read: {e.strerror}")
            fst = os.fstat(f.fileno())
            self._check_identity(f"{fst.st_dev}:{fst.st_ino}", fst.st_size)
            self._sync_file, self._sync_identity = f, self.identity
            self._sync_key = (fst.st_dev, fst.st_ino)
            self.opened_anew = True
            st = fst
        self.lost = self.detached = None
        self.mtime = st.st_mtime
        return st.st_size

    def _unreachable(self, why: str) -> int | None:
        """The path shows no readable log: read on through the open descriptor, if any
        (the job still writes to that file); otherwise the log is lost."""
        if self._sync_file is None:
            self.lost = why
            return None
        self.detached = why
        fst = os.fstat(self._sync_file.fileno())
        size, self.mtime = fst.st_size, fst.st_mtime
        if size < self.offset:
            self._check_identity(self.identity or "", size)
        return size

    def _close_sync(self) -> None:
        if self._sync_file is not None:
            self._sync_file.close()
            self._sync_file = None
            self._sync_key = None

    async def close(self) -> None:
        self._close_sync()

    def _check_identity(self, identity: str, size: int) -> None:
        reason = None
        if self.identity is not None and identity != self.identity:
            reason = "replaced"
        elif size < self.offset:
            reason = "truncated"
        self.identity = identity
        if reason is not None:
            self.offset = 0
            self.restarts += 1
            self.restart_reason = reason

    def _split(self, data: bytes) -> list[tuple[int, str]]:
        end = data.rfind(b"\n") + 1
        if end == 0:
            if len(data) < self.chunk_bytes:
                return []  # a partial line: wait for its newline
            end = len(data)  # a line longer than a chunk: hand it over in pieces
        out: list[tuple[int, str]] = []
        pos = self.offset
        whole = data[:end]
        if whole.isascii():
            # One decode for the chunk: in ASCII a character is a byte, so the offsets
            # are the lines' lengths (logs are ASCII but for the odd line).
            texts = whole.decode("ascii").split("\n")
            if whole.endswith(b"\n"):
                texts.pop()   # the empty tail after the last newline
            for text in texts:
                out.append((pos, text.rstrip("\r")))
                pos += len(text) + 1
        else:
            for raw in whole.split(b"\n"):
                if pos >= self.offset + end:
                    break  # the empty tail after the last newline
                out.append((pos, raw.rstrip(b"\r").decode("utf-8", errors="replace")))
                pos += len(raw) + 1
        self.offset += end
        return out
