"""A log's polling slows only once it has been quiet for a while: a log writing a line a
second, read every half second, finds nothing every other read, and backing off at the
first empty read left its lines waiting 1-2 s (the 10,000-job p99, docs/benchmarks.md)."""

from __future__ import annotations

from types import SimpleNamespace

from sweepd.config import PolicyConfig
from sweepd.core.logpass import QUIET_GRACE, TailClocks
from sweepd.core.states import JobState


def _clocks(job_id: int) -> TailClocks:
    clocks = TailClocks()
    job = SimpleNamespace(id=job_id, state=JobState.RUNNING)  # the fields `due` reads
    assert clocks.due(job, 0.0, finished=False)  # type: ignore[arg-type]
    return clocks


def test_a_log_with_a_line_every_other_read_keeps_the_base_interval() -> None:
    policy = PolicyConfig()
    clocks = _clocks(1)
    now = 0.0
    for k in range(20):
        clocks.read(1, fresh=k % 2 == 0, now=now, policy=policy)
        assert clocks._clocks[1].interval == policy.tail_interval_s
        now += policy.tail_interval_s


def test_a_log_quiet_beyond_the_grace_backs_off_and_is_prompt_again_on_output() -> None:
    policy = PolicyConfig()
    clocks = _clocks(2)
    intervals = []
    for k in range(QUIET_GRACE + 4):
        clocks.read(2, fresh=False, now=float(k), policy=policy)
        intervals.append(clocks._clocks[2].interval)
    base = policy.tail_interval_s
    assert intervals[:QUIET_GRACE] == [base] * QUIET_GRACE
    assert intervals[QUIET_GRACE:] == [base * 2, base * 4, base * 8, base * 16]
    clocks.read(2, fresh=True, now=100.0, policy=policy)
    assert clocks._clocks[2].interval == base and clocks._clocks[2].next_at == 100.0 + base


def _read_passes(gap: float, passes: int) -> list[int]:
    """The passes (`gap` apart) at which a log with a line for every read is read."""
    policy = PolicyConfig()
    clocks = TailClocks()
    job = SimpleNamespace(id=3, state=JobState.RUNNING, backend_id="3")
    read = []
    for k in range(passes):
        now = k * gap
        due = clocks.due_jobs([job], now, {}, clocks.ahead(now, policy))  # type: ignore[list-item]
        if due:
            read.append(k)
            clocks.read_all(due, [True], now, policy)
    return read


def test_a_log_due_between_two_passes_is_read_at_the_nearer_one() -> None:
    # Passes 0.44 s apart, a 0.5 s interval: due 0.06 s after the next pass, which reads
    # it, instead of the one after (every 0.88 s: the 10,000-job p99 near 1 s).
    assert _read_passes(0.44, 10) == list(range(10))
    # Due just after a pass 0.22 s apart: read 0.06 s early, never more than half a gap.
    assert _read_passes(0.22, 9) == [0, 2, 4, 6, 8]
    assert _read_passes(0.3, 7) == [0, 2, 4, 6]


def test_a_slow_pass_reads_no_log_more_than_half_the_interval_early() -> None:
    policy = PolicyConfig()
    clocks = TailClocks()
    assert clocks.ahead(0.0, policy) == 0.0   # the first pass: no gap known
    assert clocks.ahead(10.0, policy) == policy.tail_interval_s / 2
    assert abs(clocks.ahead(10.2, policy) - 0.1) < 1e-9
