"""Incremental reader of one job log: complete new lines since the last call.

`offset` and `identity` are plain attributes so the engine can persist them and resume
after a daemon restart without reading a log twice. Memory is bounded by `chunk_bytes`
per call, whatever the log's size: a caller that wants everything calls again while
`has_more` is true.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import BinaryIO


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
        self.offset = offset               # first byte not yet returned
        self.identity = identity           # "dev:ino" of the file `offset` belongs to
        self.chunk_bytes = chunk_bytes
        self.restarts = 0                  # times the file was truncated or replaced
        self.restart_reason: str | None = None   # "truncated" / "replaced", last restart
        self.has_more = False              # bytes beyond `offset` were left for next call
        self.last_read_bytes = 0           # bytes read from disk by the last call
        self._sync_file: BinaryIO | None = None
        self._sync_identity: str | None = None

    async def read_lines(self) -> list[tuple[int, str]]:
        """(byte offset where the line starts, line without CR/LF), for complete lines."""
        return await asyncio.to_thread(self.read_lines_sync)

    def read_lines_sync(self) -> list[tuple[int, str]]:
        """`read_lines` for a worker thread; the engine reads every due log in one such
        thread call per pass (a thread hop per log cost more than the reads)."""
        self.last_read_bytes = 0
        self.has_more = False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._close_sync()
            return []
        self._check_identity(f"{st.st_dev}:{st.st_ino}", st.st_size)
        if st.st_size <= self.offset:
            return []
        if self._sync_file is None or self._sync_identity != self.identity:
            self._close_sync()
            try:
                f = open(self.path, "rb")  # noqa: SIM115 (kept open between reads)
            except FileNotFoundError:
                return []
            fst = os.fstat(f.fileno())
            self._check_identity(f"{fst.st_dev}:{fst.st_ino}", fst.st_size)
            self._sync_file, self._sync_identity = f, self.identity
        self._sync_file.seek(self.offset)
        data = self._sync_file.read(self.chunk_bytes)
        self.last_read_bytes = len(data)
        lines = self._split(data)
        self.has_more = len(data) == self.chunk_bytes and st.st_size > self.offset
        return lines

    def _close_sync(self) -> None:
        if self._sync_file is not None:
            self._sync_file.close()
            self._sync_file = None

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
        pos = 0
        for raw in data[:end].split(b"\n"):
            if pos >= end:
                break  # the empty tail after the last newline
            text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            out.append((self.offset + pos, text))
            pos += len(raw) + 1
        self.offset += end
        return out
