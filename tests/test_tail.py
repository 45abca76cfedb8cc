"""LogTailer on real files in tmp_path."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sweepd.monitor.tail import LogTailer

_OPEN: list[LogTailer] = []


def tail(*args: object, **kwargs: object) -> LogTailer:
    """A LogTailer closed after the test (it keeps its log open between reads)."""
    tailer = LogTailer(*args, **kwargs)  # type: ignore[arg-type]
    _OPEN.append(tailer)
    return tailer


@pytest.fixture(autouse=True)
async def close_tailers() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().close()


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


async def test_missing_file_returns_nothing(tmp_path: Path) -> None:
    tailer = tail(tmp_path / "12345-JAX-llama2-70b.log")
    assert await tailer.read_lines() == []
    assert (tailer.offset, tailer.identity) == (0, None)


async def test_offsets_and_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"JOB_ID=1\n0: completed st")
    tailer = tail(log)
    assert await tailer.read_lines() == [(0, "JOB_ID=1")]
    assert tailer.offset == 9
    assert await tailer.read_lines() == []  # the partial line waits for its newline
    assert not tailer.has_more
    append(log, b"ep: 0, x\n\nlast\n")
    assert await tailer.read_lines() == [(9, "0: completed step: 0, x"), (33, ""), (34, "last")]
    assert tailer.offset == log.stat().st_size


async def test_crlf_and_invalid_utf8(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"a\r\n\xff\xfebad \xe2\x82\r\nok\n")
    lines = await tail(log).read_lines()
    assert [offset for offset, _ in lines] == [0, 3, 13]
    assert lines[0][1] == "a"
    assert lines[1][1].startswith("\ufffd") and lines[1][1].endswith("\ufffd")
    assert lines[2][1] == "ok"


async def test_resume_from_persisted_offset_and_identity(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\ntwo\n")
    first = tail(log)
    await first.read_lines()
    append(log, b"three\n")
    again = tail(log, offset=first.offset, identity=first.identity)
    assert await again.read_lines() == [(8, "three")]
    assert again.restarts == 0


async def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"first line\nsecond line\n")
    tailer = tail(log)
    await tailer.read_lines()
    log.write_bytes(b"new\n")  # same inode, smaller than the offset
    assert await tailer.read_lines() == [(0, "new")]
    assert (tailer.restarts, tailer.restart_reason) == (1, "truncated")


async def test_replacement_restarts_from_zero(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"old\n")
    tailer = tail(log)
    await tailer.read_lines()
    old_identity = tailer.identity
    fresh = tmp_path / "fresh.log"
    fresh.write_bytes(b"replacement line one\nline two\n")  # larger than the old offset
    os.replace(fresh, log)
    assert await tailer.read_lines() == [(0, "replacement line one"), (21, "line two")]
    assert (tailer.restarts, tailer.restart_reason) == (1, "replaced")
    assert tailer.identity != old_identity


async def test_line_longer_than_chunk_comes_in_pieces(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"x" * 25 + b"\nend\n")
    tailer = tail(log, chunk_bytes=10)
    pieces: list[tuple[int, str]] = []
    for _ in range(10):
        got = await tailer.read_lines()
        assert tailer.last_read_bytes <= 10
        pieces.extend(got)
        if not tailer.has_more:
            break
    assert pieces == [(0, "x" * 10), (10, "x" * 10), (20, "x" * 5), (26, "end")]


async def test_50mb_log_in_bounded_chunks(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    line = b"0: " + b"y" * 96 + b"\n"  # 100 bytes
    count = 500_000
    log.write_bytes(line * count)
    chunk = 1 << 20
    tailer = tail(log, chunk_bytes=chunk)
    total_lines = calls = 0
    expected_offset = 0
    while True:
        before = tailer.offset
        got = await tailer.read_lines()
        calls += 1
        assert tailer.last_read_bytes <= chunk
        assert tailer.offset - before <= chunk
        if got:
            assert got[0][0] == expected_offset
            expected_offset = got[-1][0] + 100
        total_lines += len(got)
        if not tailer.has_more:
            break
    assert total_lines == count
    assert tailer.offset == len(line) * count
    assert calls >= (len(line) * count) // chunk


async def test_a_deleted_log_is_read_on_through_the_open_file(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"line one\n")
    writer = log.open("ab")   # the job's own descriptor, as Slurm's stdout
    try:
        tailer = tail(log)
        assert await tailer.read_lines() == [(0, "line one")]
        log.unlink()
        writer.write(b"line two\n")
        writer.flush()
        assert await tailer.read_lines() == [(9, "line two")]
        assert (tailer.lost, tailer.detached) == (None, "deleted")
    finally:
        writer.close()


async def test_a_directory_in_the_logs_place_does_not_hide_the_open_file(
        tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\n")
    writer = log.open("ab")
    try:
        tailer = tail(log)
        assert await tailer.read_lines() == [(0, "one")]
        log.unlink()
        log.mkdir()
        writer.write(b"two\n")
        writer.flush()
        assert await tailer.read_lines() == [(4, "two")]
        assert tailer.detached == "not a regular file" and tailer.restarts == 0
    finally:
        writer.close()


async def test_a_log_gone_before_it_was_opened_is_lost_and_stays_so(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.mkdir()
    tailer = tail(log, offset=40, identity="1:2")
    assert await tailer.read_lines() == []
    assert tailer.lost == "not a regular file"
    assert tailer.stored_identity == "lost|1:2"
    # A restarted daemon reads the mark back: the offset's file is still "1:2".
    again = tail(log, offset=40, identity=tailer.stored_identity)
    assert (again.identity, again.lost is not None) == ("1:2", True)
    log.rmdir()
    log.write_bytes(b"a new file\n")
    assert await again.read_lines() == [(0, "a new file")]
    assert again.lost is None and again.restart_reason == "replaced"
