"""A job that a cancel outside sweepd ended (a person's scancel, a preemption), told from
the scheduler's word, and how far its measurement had got before the cancel. Pure.

The classifier counts a stop by signal after the last expected step as the toolkit's benign
cleanup exit (maxtext-slurm-facts.md §3, "cleanup"); when the scheduler says the job was
cancelled and sweepd did not cancel it, that is a person's (or a preemption's) word instead,
judged by the policy's cancel rules (`cancelled.measured`, `cancelled.rerun`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.core.policy import OutsideCancel
from sweepd.monitor.classify_tables import PREEMPTED
from sweepd.monitor.facts import FailureClass, StepFact, Verdict
from sweepd.monitor.steady import steady_window

# The scheduler's states that say a cancel ended the job.
CANCEL_STATES = frozenset({"CANCELLED", "PREEMPTED"})


def outside_cancel(scheduler_state: str | None, *, by_sweepd: bool, steps: Sequence[StepFact],
                   profiler: bool, expected_steps: int, failure_only: bool
                   ) -> OutsideCancel | None:
    """The cancel that ended the job when it came from outside sweepd (None otherwise).
    Measured: every step of its steady window (within the steps it runs) printed by rank 0;
    a run short of the window by design (`failure_only`) is measured once its last step is."""
    if by_sweepd or scheduler_state not in CANCEL_STATES:
        return None
    what = "preempted" if scheduler_state == "PREEMPTED" else "cancelled outside sweepd"
    printed = {s.step for s in steps if s.rank in (None, 0)}
    last = max(printed) if printed else None
    if failure_only:
        done = expected_steps > 0 and last is not None and last >= expected_steps - 1
        return OutsideCancel(what, last, None, done)
    full = steady_window(profiler)
    window = range(full.start, min(full.stop, expected_steps))
    if not window:
        return OutsideCancel(what, last, None, False)
    return OutsideCancel(what, last, (window.start, window.stop - 1), set(window) <= printed)


def as_cancel_verdict(verdict: Verdict, cancel: OutsideCancel) -> Verdict:
    """The classifier's verdict for a job a cancel outside sweepd ended: no failure class
    when its measurement stands (the policy's `cancelled.measured` names why), else the
    cancel (the classifier called a stop after the last step a success: it is not)."""
    if cancel.measured:
        return Verdict(klass=None, evidence=verdict.evidence)
    if verdict.klass == FailureClass.CANCELLED:
        return verdict
    return Verdict(klass=FailureClass.CANCELLED, evidence=verdict.evidence,
                   detail=PREEMPTED if cancel.what == "preempted" else
                   f"cancelled after step {cancel.last_step}, before every step of its "
                   "steady window was printed")
