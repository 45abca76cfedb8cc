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
