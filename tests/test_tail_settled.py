"""A log that has not changed since its last read costs one `stat` and nothing else, even
when it ends mid-line (a writer that flushes in blocks leaves one there most of the time):
the structural half of issue 42's pass cost at 10,000 jobs, counted, not timed. And what
settling skips never hides a change: growth, a completed line, a truncation, a
replacement (same size), a deletion."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sweepd.monitor.tail import LogTailer

STEP = b"0: completed step: 7, seconds: 1.000, TFLOP/s/device: 400.0, Tokens/s/device: 1400.0\n"

_OPEN: list[LogTailer] = []


@pytest.fixture(autouse=True)
async def close_tailers() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().close()


def tailer(path: Path) -> LogTailer:
    t = LogTailer(path)
    _OPEN.append(t)
    return t


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch, paths: set[str]) -> Iterator[dict[str, int]]:
    """Calls of the file functions a tailer uses, on these logs (by path or by one of the
    descriptors open on them), counted while the block runs."""
    calls = {"stat": 0, "fstat": 0, "pread": 0, "read": 0, "open": 0}
    fds = {int(n) for n in os.listdir("/proc/self/fd")
           if os.path.realpath(f"/proc/self/fd/{n}") in paths}

    def wrap(name: str, real: Callable[..., Any], on_fd: bool) -> Callable[..., Any]:
        def call(target: Any, *a: Any, **k: Any) -> Any:
            if (target in fds) if on_fd else (os.fspath(target) in paths):
                calls[name] += 1
            return real(target, *a, **k)
        return call

    monkeypatch.setattr(os, "stat", wrap("stat", os.stat, False))
    monkeypatch.setattr(os, "fstat", wrap("fstat", os.fstat, True))
    monkeypatch.setattr(os, "pread", wrap("pread", os.pread, True))
    monkeypatch.setattr(os, "read", wrap("read", os.read, True))
    monkeypatch.setattr("builtins.open", wrap("open", open, False))
    try:
        yield calls
    finally:
        monkeypatch.undo()


async def test_unchanged_logs_cost_one_stat_each_and_no_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = 20
    paths = [tmp_path / f"job-{j}.log" for j in range(count)]
    for j, path in enumerate(paths):
        # Half end on a newline, half mid-line (the partial line waits for its newline).
        path.write_bytes(STEP * 2 + (b"0: completed st" if j % 2 else b""))
    tailers = [tailer(p) for p in paths]
    for t in tailers:
        assert len(t.read_lines_sync()) == 2
    for t in tailers:
        assert t.read_lines_sync() == []   # settled: what is left is a partial line at most
    reads = [t.reads for t in tailers]
    with counted(monkeypatch, {str(p) for p in paths}) as calls:
        for _ in range(3):
            assert all(t.read_lines_sync() == [] for t in tailers)
    assert calls == {"stat": 3 * count, "fstat": 0, "pread": 0, "read": 0, "open": 0}
    assert [t.reads for t in tailers] == reads


async def test_settling_hides_no_change(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(STEP + b"0: comp")
    t = tailer(log)
    assert [text for _, text in t.read_lines_sync()] == [STEP.decode().strip()]
    assert t.read_lines_sync() == []
    # The partial line completed: read from where it starts.
    with log.open("ab") as f:
        f.write(b"leted\n")
    assert t.read_lines_sync() == [(len(STEP), "0: completed")]
    assert t.read_lines_sync() == []
    # A new mtime alone: looked at again, nothing to read.
    size = log.stat().st_size
    os.utime(log, ns=(0, 0))
    assert t.read_lines_sync() == [] and t.restarts == 0
    # Truncated and rewritten shorter: read again from the start.
    log.write_bytes(b"z\n")
    assert (t.read_lines_sync(), t.restart_reason) == ([(0, "z")], "truncated")
    assert t.read_lines_sync() == []
    log.write_bytes(b"x" * (size - 1) + b"\n")
    assert t.read_lines_sync() == [(2, "x" * (size - 3))]
    # Replaced by another file of the same size: read from the start of the new file.
    other = tmp_path / "other.log"
    other.write_bytes(b"y" * (size - 1) + b"\n")
    other.replace(log)
    assert (t.read_lines_sync(), t.restart_reason) == ([(0, "y" * (size - 1))], "replaced")
    assert t.read_lines_sync() == []
    # Deleted: read on through the open file, and said so.
    with log.open("ab") as f:
        log.unlink()
        assert t.read_lines_sync() == []
        assert t.detached == "deleted"
        f.write(b"after\n")
    assert t.read_lines_sync() == [(size, "after")]
    assert t.read_lines_sync() == [] and t.detached == "deleted" and not t.lost
