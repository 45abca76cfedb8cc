"""A job a cancel outside sweepd ended: never a success; its measurement stands by its own
rule (`cancelled.measured`) only when its steady window was complete before the cancel."""

from __future__ import annotations

from dataclasses import replace

from sweepd.core.outside_cancel import as_cancel_verdict, outside_cancel
from sweepd.core.policy import Act, OutsideCancel, decide
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import StepFact, Verdict
from tests.golden_files import GOLDEN, check_golden
from tests.support.policy import case


def steps(last: int) -> list[StepFact]:
    return [StepFact(rank=0, step=s, tgs=1000.0) for s in range(last + 1)]


def cancel_of(state: str, last: int, *, by_sweepd: bool = False, profiler: bool = False,
              expected: int = 15, failure_only: bool = False) -> OutsideCancel | None:
    return outside_cancel(state, by_sweepd=by_sweepd, steps=steps(last), profiler=profiler,
                          expected_steps=expected, failure_only=failure_only)


def cancelled(last: int, **how: bool | int) -> OutsideCancel:
    found = cancel_of("CANCELLED", last, **how)  # type: ignore[arg-type]
    assert found is not None
    return found


def test_only_the_schedulers_cancel_not_sweepds_is_outside() -> None:
    assert cancel_of("COMPLETED", 14) is None
    assert cancel_of("FAILED", 14) is None            # the toolkit's cleanup exit 143
    assert cancel_of("CANCELLED", 14, by_sweepd=True) is None   # sweepd's hang cancel
    assert cancel_of("PREEMPTED", 14) is not None


def test_the_window_decides_whether_the_measurement_stands() -> None:
    done = cancelled(14)
    assert done.measured and done.window == (5, 14)
    assert not cancelled(13).measured
    # Cancelled after step 14 of 50: the window (5-14) is complete.
    assert cancelled(20, expected=50).measured
    # With the profiler the window is 9-14.
    assert cancelled(14, profiler=True).window == (9, 14)
    # A run short of the window by design: measured once its last step is printed.
    assert cancelled(4, expected=5, failure_only=True).measured
    assert not cancelled(3, expected=5, failure_only=True).measured
    assert not cancelled(4, expected=5).measured


def test_a_measured_cancel_is_its_own_rule_and_says_why() -> None:
    cancel = cancelled(14)
    verdict = as_cancel_verdict(Verdict(None, evidence="Status: CANCELLED ()"), cancel)
    assert verdict.klass is None and verdict.evidence == "Status: CANCELLED ()"
    a = decide(replace(case(None), verdict=verdict, cancel=cancel))
    assert (a.act, a.rule, a.outcome) == (Act.ACCEPT, "cancelled.measured", "pass")
    check_golden(GOLDEN / "outside_cancel" / "measured_cancel_reason.txt", a.reason + "\n")


def test_a_cancel_before_the_window_is_complete_is_a_cancel() -> None:
    short = replace(cancelled(14), measured=False)
    # The classifier called a stop after the last step a success: it is a cancel here.
    verdict = as_cancel_verdict(Verdict(None, evidence="Status: CANCELLED ()"), short)
    assert verdict.klass == F.CANCELLED
    a = decide(replace(case(None), verdict=verdict, cancel=short))
    assert (a.act, a.rule, a.outcome) == (Act.RETRY, "cancelled.rerun", "cancelled")
    # Asked, not run again, the second time.
    again = decide(replace(case(None), verdict=verdict, cancel=short,
                           prior=(Verdict(F.CANCELLED),)))
    assert (again.act, again.rule) == (Act.STOP, "cancelled.again")
