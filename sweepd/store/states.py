"""Sweep, run and job states and their allowed transitions, as data.

The SQL CHECK constraints in `migrations/` list the same values; a test keeps
them in agreement. A transition not listed here is refused by the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar


class SweepState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_DECISION = "awaiting_decision"
    DONE = "done"
    FAILED = "failed"
    ABORTED = "aborted"


class RunState(StrEnum):
    """A planned point of a sweep (e.g. batch 12); its attempts are jobs."""

    PENDING = "pending"
    ACTIVE = "active"
    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobState(StrEnum):
    """One scheduler submission: an attempt of a run."""

    SUBMITTING = "submitting"
    QUEUED = "queued"
    RUNNING = "running"
    HUNG = "hung"
    RETRIED = "retried"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


SWEEP_TRANSITIONS: dict[SweepState, frozenset[SweepState]] = {
    SweepState.QUEUED: frozenset({SweepState.RUNNING, SweepState.ABORTED, SweepState.FAILED}),
    SweepState.RUNNING: frozenset(
        {SweepState.AWAITING_DECISION, SweepState.DONE, SweepState.FAILED, SweepState.ABORTED}
    ),
    SweepState.AWAITING_DECISION: frozenset({SweepState.RUNNING, SweepState.ABORTED}),
    SweepState.DONE: frozenset(),
    SweepState.FAILED: frozenset(),
    SweepState.ABORTED: frozenset(),
}

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.PENDING: frozenset({RunState.ACTIVE, RunState.CANCELLED}),
    RunState.ACTIVE: frozenset({RunState.PASSED, RunState.FAILED, RunState.CANCELLED}),
    RunState.PASSED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

_JOB_ENDS = frozenset({JobState.RETRIED, JobState.DONE, JobState.FAILED, JobState.CANCELLED})

JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.SUBMITTING: frozenset({JobState.QUEUED, JobState.FAILED, JobState.CANCELLED}),
    JobState.QUEUED: frozenset({JobState.RUNNING}) | _JOB_ENDS,
    JobState.RUNNING: frozenset({JobState.HUNG}) | _JOB_ENDS,
    JobState.HUNG: _JOB_ENDS,
    JobState.RETRIED: frozenset(),
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

SWEEP_ACTIVE = frozenset({SweepState.QUEUED, SweepState.RUNNING})
JOB_ACTIVE = frozenset({JobState.SUBMITTING, JobState.QUEUED, JobState.RUNNING, JobState.HUNG})


E = TypeVar("E", bound=StrEnum)


def sources(transitions: Mapping[E, frozenset[E]], target: E) -> list[str]:
    """States from which `target` may be entered, sorted for stable SQL."""
    return sorted(str(s) for s, targets in transitions.items() if target in targets)
