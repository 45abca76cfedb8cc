"""A write to a log wakes its read (inotify: `monitor/watch.py`): the line is read at the
next pass, not at the log's next tail interval, and a log whose writes are heard is no
longer read ahead of its clock at every pass (docs/benchmarks.md, issue 49). inotify only
ever makes a read earlier: without it, or for a log it never hears (a shared file system
written by another host), the stat at the log's tail clock reads the line as before."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sweepd.config import PolicyConfig
from sweepd.core.follow import LogFollower
from sweepd.core.logpass import QUIET_GRACE, TailClocks, read_logs
from sweepd.core.states import JobState
from sweepd.monitor.watch import LogWatch
from sweepd.store.store import Store
from tests.support.clock import HandClock
from tests.support.running_job import running_job

STEP = b"0: completed step: 7, seconds: 1.000, TFLOP/s/device: 400.0, Tokens/s/device: 1400.0\n"


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture
def watch() -> Iterator[LogWatch]:
    w = LogWatch()
    yield w
    w.close()


def test_a_write_is_heard_once_and_only_for_its_log(watch: LogWatch, tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    for path in (a, b):
        path.write_bytes(STEP)
    assert watch.watch(1, str(a)) and watch.watch(2, str(b))
    assert watch.drain() == set()
    _append(a, STEP)
    _append(a, STEP)
    assert watch.drain() == {1}
    assert watch.drain() == set()
    watch.forget(1)
    _append(a, STEP)
    _append(b, STEP)
    assert watch.drain() == {2}


def test_a_deleted_log_is_no_longer_watched(watch: LogWatch, tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(STEP)
    assert watch.watch(1, str(log))
    log.unlink()    # nothing holds it open: the kernel drops the watch (IN_IGNORED)
    log.write_bytes(STEP)   # another file at the path: not the one watched
    _append(log, STEP)
    assert watch.drain() == set()
    assert watch.watch(1, str(log))   # the follower opens the new file: watched again
    _append(log, STEP)
    assert watch.drain() == {1}


def test_an_overflowed_queue_makes_every_watched_log_heard(
        watch: LogWatch, tmp_path: Path) -> None:
    most = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if most > 100_000:
        pytest.skip(f"a queue of {most} events takes too long to overflow")
    logs = [tmp_path / f"{k}.log" for k in range(3)]
    for k, path in enumerate(logs):
        path.write_bytes(b"")
        assert watch.watch(k, str(path))
    fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in logs[:2]]
    try:
        for _ in range(most // 2 + 1):   # alternating: the kernel merges no two events
            for fd in fds:
                os.write(fd, b"x")
    finally:
        for fd in fds:
            os.close(fd)
    assert watch.drain() == {0, 1, 2}   # which were written is lost: every log is due
    assert watch.overflows == 1


def test_without_inotify_nothing_is_watched(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(STEP)
    off = LogWatch(enabled=False)
    assert not off.watch(1, str(log))
    _append(log, STEP)
    assert off.drain() == set()


def test_a_heard_log_is_due_at_once_and_never_read_ahead_of_its_clock() -> None:
    policy = PolicyConfig()
    clocks = TailClocks()
    heard = SimpleNamespace(id=1, state=JobState.RUNNING, backend_id="1")
    deaf = SimpleNamespace(id=2, state=JobState.RUNNING, backend_id="2")
    jobs = [heard, deaf]

    def due(now: float) -> list[int]:
        got = clocks.due_jobs(jobs, now, {}, clocks.ahead(now, policy))  # type: ignore[arg-type]
        clocks.read_all(got, [True] * len(got), now, policy)
        return [j.id for j in got]

    assert due(0.0) == [1, 2]
    clocks.hear({1})
    # 0.44 s on: the deaf log is read ahead (due at 0.5); the heard one is woken by its
    # writes, and its clock (0.5) has not come.
    assert due(0.44) == [1, 2]
    clocks.hear({1})
    assert due(0.6) == [1]      # heard again: read at once; the deaf one read at 0.44
    # No write heard: read ahead, it would be due now (1.0 + 0.2 >= 1.1); it waits.
    assert due(1.0) == [2]
    assert due(1.15) == [1]     # ...and its clock reads it: the stat path stays
    clocks.hear({99})           # a job not followed: nothing made for it
    assert 99 not in clocks._clocks


def test_a_log_quiet_for_long_is_read_at_the_pass_after_its_next_write() -> None:
    # A job silent through a long compile: its clock backed off to 8 s. Its first step line
    # waited for that clock; heard, it is read at the next pass.
    policy = PolicyConfig()
    clocks = TailClocks()
    job = SimpleNamespace(id=1, state=JobState.RUNNING, backend_id="1")
    read_at = 0.0
    for _ in range(QUIET_GRACE + 4):
        assert clocks.due_jobs([job], read_at, {}) == [job]  # type: ignore[list-item]
        clocks.read_all([job], [False], read_at, policy)  # type: ignore[list-item]
        read_at = clocks._clocks[1].next_at
    assert clocks._clocks[1].interval == 16 * policy.tail_interval_s
    now = read_at - clocks._clocks[1].interval + 0.3   # 0.3 s after the last read
    assert clocks.due_jobs([job], now, {}) == []  # type: ignore[list-item]
    clocks.hear({1})
    assert clocks.due_jobs([job], now, {}) == [job]  # type: ignore[list-item]


# -- through the pass's log reading, over a real store ------------------------------------

async def _offsets_after_passes(store: Store, log: Path, watch: bool,
                                passes: list[float]) -> list[int]:
    """The job's stored log offset after each pass at these times; a line is written after
    the first pass."""
    await running_job(store, log)
    clock, clocks, policy = HandClock(), TailClocks(), PolicyConfig()
    follower = LogFollower(store, clock, missing_grace_s=30, watch=watch)

    async def checkpoint() -> None:
        return None

    offsets = []
    try:
        for k, now in enumerate(passes):
            clock.t = now
            await read_logs(store, follower, clocks, policy, now, await store.active.jobs(),
                            {}, checkpoint, lambda: False)
            offsets.append((await store.active.jobs())[0].log_offset)
            if k == 0:
                _append(log, STEP)
    finally:
        await follower.retain(set())
    return offsets


async def test_a_line_written_is_read_at_the_next_pass(store: Store, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(STEP)
    # Passes 0.1 s apart, a 0.5 s tail interval: the stat would read the line at 0.5 s.
    offsets = await _offsets_after_passes(store, log, True, [0.0, 0.1])
    assert offsets == [len(STEP), 2 * len(STEP)]


async def test_without_inotify_the_stat_at_the_tail_interval_reads_the_line(
        store: Store, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(STEP)
    offsets = await _offsets_after_passes(store, log, False, [0.0, 0.1, 0.2, 0.5])
    assert offsets == [len(STEP), len(STEP), len(STEP), 2 * len(STEP)]


def test_a_heard_log_whose_writes_go_unannounced_reads_ahead_again() -> None:
    """A heard log whose watch is lost (replaced and re-watch refused, a second job's log on
    the same file, an unmount) would otherwise never read ahead again: new output that no
    event announced puts it back on the read-ahead, until a write is heard again."""
    policy = PolicyConfig()
    for read in ("read", "read_all"):
        clocks = TailClocks()
        job = SimpleNamespace(id=1, state=JobState.RUNNING, backend_id="1")

        def read_it(fresh: bool, now: float, clocks: TailClocks = clocks, how: str = read,
                    job: Any = job) -> None:
            if how == "read":
                clocks.read(1, fresh, now, policy)
            else:
                clocks.read_all([job], [fresh], now, policy)

        clocks.due_jobs([job], 0.0, {})  # type: ignore[list-item]
        clocks.hear({1})
        read_it(True, 0.0)                      # announced: stays heard
        assert clocks._clocks[1].heard
        read_it(True, 0.5)                      # its clock found output nobody announced
        assert not clocks._clocks[1].heard
        # Due at 1.0; read ahead by 0.2 at 0.9 again, as a log never heard.
        assert clocks.due_jobs([job], 0.9, {}, ahead=0.2) == [job]  # type: ignore[list-item]
        clocks.hear({1})
        assert clocks._clocks[1].heard


def test_a_refused_inotify_instance_is_asked_again_later_not_never(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-user instance limit is shared with the user's other programs: one refusal
    (EMFILE) must not turn the hint off for the daemon's life."""
    import inotify_simple

    real = inotify_simple.INotify
    refusals = [OSError(24, "Too many open files")]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(inotify_simple, "INotify", flaky)
    log = tmp_path / "job.log"
    log.write_text("")
    watch = LogWatch()
    assert not watch.watch(1, str(log))       # refused
    assert not watch.watch(1, str(log))       # not asked again at once
    assert watch.enabled
    watch._retry_at = 0.0                     # the minute has passed
    assert watch.watch(1, str(log))
    with log.open("a") as f:
        f.write("line\n")
    assert watch.drain() == {1}
    watch.close()
