"""Steady-state throughput of a finished run: the number every sweep compares.

batch-sweep.SKILL.md Step 6: mean `Tokens/s/device` over steps 5-14 (0-4 are compilation
warm-up). xla-tuning.SKILL.md: the profiler perturbs steps 5-8, so with it on use 9-14.
All ranks print identical metrics, so only rank 0 (or an unprefixed Kubernetes log) counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

from sweepd.monitor.facts import StepFact

STEADY_LAST = 14
STEADY_FIRST = 5
STEADY_FIRST_PROFILER = 9


def steady_window(profiler: bool) -> range:
    return range(STEADY_FIRST_PROFILER if profiler else STEADY_FIRST, STEADY_LAST + 1)


def steady_state(
    steps: Mapping[int, StepFact] | Sequence[StepFact], profiler: bool
) -> tuple[float, float | None] | None:
    """(mean TGS, mean MFU or None when no step printed MFU), or None if no step in range."""
    items = steps.values() if isinstance(steps, Mapping) else steps
    window = steady_window(profiler)
    chosen: dict[int, StepFact] = {}
    for fact in items:
        # A step printed twice (a restarted tail) counts once; other ranks never count.
        if fact.rank in (None, 0) and fact.step in window:
            chosen.setdefault(fact.step, fact)
    if not chosen:
        return None
    tgs = fmean(f.tgs for f in chosen.values())
    mfus = [f.mfu for f in chosen.values() if f.mfu is not None]
    return tgs, (fmean(mfus) if mfus else None)
