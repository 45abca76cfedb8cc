"""The states and their transitions, under the name the engine's callers knew them by.

They live in `store/states.py`: the store checks every transition against them, and the
store imports nothing above it. Everything in sweepd imports them from there; this name
stays for callers outside the package (tests, scripts).
"""

from sweepd.store.states import (
    JOB_ACTIVE,
    JOB_TRANSITIONS,
    RUN_TRANSITIONS,
    SWEEP_ACTIVE,
    SWEEP_TRANSITIONS,
    JobState,
    RunState,
    SweepState,
    sources,
)

__all__ = ["JOB_ACTIVE", "JOB_TRANSITIONS", "RUN_TRANSITIONS", "SWEEP_ACTIVE",
           "SWEEP_TRANSITIONS", "JobState", "RunState", "SweepState", "sources"]
