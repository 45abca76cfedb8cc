"""Steady-state throughput of a finished run: the number every sweep compares.

batch-sweep.SKILL.md Step 6: mean `Tokens/s/device` over steps 5-14 (0-4 are compilation
warm-up). xla-tuning.SKILL.md: the profiler perturbs steps 5-8, so with it on use 9-14.
All ranks print identical metrics, so only rank 0 (or an unprefixed Kubernetes log) counts.

Steps 0-2 are no step times at all (real MaxText on a TPU v5e chip, reference/tpu/: step 0
takes 1.6-2.1 s compiling, step 1 ~0.6 s, and step 2 logs up to 2.5 M tokens/s, the
asynchronous dispatch timed rather than the step); values settle from step 3. So the
fallback for a run that printed none of the window's steps (`fallback=True`: `sweepd parse`
on a short log) takes its steps from 3 on, never 0-2 (nor the profiler's 5-8).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean, median, stdev

from sweepd.monitor.facts import StepFact

STEADY_LAST = 14
STEADY_FIRST = 5
STEADY_FIRST_PROFILER = 9
SETTLED_FIRST = 3          # steps 0-2: compilation and dispatch, never a step time
PROFILED = range(STEADY_FIRST, STEADY_FIRST_PROFILER)   # what the profiler perturbs
# In a profiled run, a window step reading more than this factor off the median of steps
# 5-14 is the profiler's start or stop, not a step time, and is left out. Upstream MaxText on
# the TPU v5e chip (profiler=xplane skip_first_n_steps_for_profiler=10 profiler_steps=3)
# perturbs steps 10-14 instead of 5-8: 0.46x, 17.7x, 0.16x and 21x the others; its
# unperturbed steps agree within 0.4 %, so no real step is near the factor. Over 5-14 the
# unperturbed steps outnumber the profiler's whichever four or five it perturbs, so their
# median is the reference, not the window's own (which the profiler's steps may outnumber).
PROFILER_ARTEFACT = 2.0


def steady_window(profiler: bool) -> range:
    return range(STEADY_FIRST_PROFILER if profiler else STEADY_FIRST, STEADY_LAST + 1)


def fallback_window(profiler: bool) -> tuple[int, ...]:
    """The steps a run short of the window is measured over: settled ones only."""
    return tuple(s for s in range(SETTLED_FIRST, STEADY_LAST + 1)
                 if not (profiler and s in PROFILED))


def window_words(profiler: bool | None = None) -> str:
    """The window as `explain`, `sweepd parse` and the docs say it (None: both cases)."""
    first = {None: f"{STEADY_FIRST}-{STEADY_LAST} ({STEADY_FIRST_PROFILER}-{STEADY_LAST} "
                   "with the profiler)",
             False: f"{STEADY_FIRST}-{STEADY_LAST}",
             True: f"{STEADY_FIRST_PROFILER}-{STEADY_LAST}, the profiler's"}[profiler]
    return (f"steady window steps {first}; steps 0-{SETTLED_FIRST - 1} (compilation, "
            "warm-up) never count, not even where a run is shorter than the window")


def no_steady_steps(profiler: bool) -> str:
    """The evidence of a run that passed without a step in the window."""
    return f"no steady-state steps in the log ({window_words(profiler)})"


def steady_steps(steps: Mapping[int, StepFact] | Sequence[StepFact] | Iterable[StepFact],
                 profiler: bool, fallback: bool = False) -> dict[int, StepFact]:
    """Step -> its fact, over the window (rank 0's or unprefixed, each step once); with
    `fallback`, a run with none of the window's steps is taken over `fallback_window`."""
    items = list(steps.values() if isinstance(steps, Mapping) else steps)
    windows: list[Iterable[int]] = [steady_window(profiler)]
    if fallback:
        windows.append(fallback_window(profiler))
    for window in windows:
        wanted = frozenset(window)
        chosen: dict[int, StepFact] = {}
        for fact in items:
            # A step printed twice (a restarted tail) counts once; other ranks never count.
            if fact.rank in (None, 0) and fact.step in wanted:
                chosen.setdefault(fact.step, fact)
        if chosen:
            chosen = dict(sorted(chosen.items()))
            if not profiler:
                return chosen
            kept = unperturbed({s: f.tgs for s, f in chosen.items()},
                               {f.step: f.tgs for f in items if f.rank in (None, 0)})
            return {s: f for s, f in chosen.items() if s in kept}
    return {}


def unperturbed(window: Mapping[int, float], every: Mapping[int, float]) -> set[int]:
    """The window's steps (step -> TGS) of a profiled run that are step times: those within
    PROFILER_ARTEFACT of the median over steps 5-14 (`every`: the run's steps); all of
    them where there is no such reference or nothing would be left."""
    reference = [t for s, t in every.items()
                 if STEADY_FIRST <= s <= STEADY_LAST and math.isfinite(t) and t > 0]
    if len(reference) < 3:
        return set(window)
    mid = median(reference)
    kept = {s for s, t in window.items()
            if mid / PROFILER_ARTEFACT <= t <= mid * PROFILER_ARTEFACT}
    return kept or set(window)


def relative_se(values: Iterable[float], least: int) -> float | None:
    """The standard error of the values' mean, relative to it: None with fewer than `least`
    finite positive values, or where a garbled log's huge numbers overflow."""
    kept = [v for v in values if math.isfinite(v) and v > 0]
    if len(kept) < least or len(kept) < 2:
        return None
    try:
        spread = stdev(kept) / fmean(kept)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    return spread / math.sqrt(len(kept)) if math.isfinite(spread) else None


def steady_state(
    steps: Mapping[int, StepFact] | Sequence[StepFact], profiler: bool, fallback: bool = False
) -> tuple[float, float | None] | None:
    """(mean TGS, mean MFU or None when no step printed MFU), or None if no step in range."""
    chosen = steady_steps(steps, profiler, fallback)
    if not chosen:
        return None
    tgs = mean([f.tgs for f in chosen.values()])
    mfus = [f.mfu for f in chosen.values() if f.mfu is not None]
    return tgs, (mean(mfus) if mfus else None)


def mean(values: Sequence[float]) -> float:
    """The mean, never raising: a garbled log's huge or infinite numbers give inf or nan
    (`fmean`'s exact sum refuses to overflow, and refuses inf - inf)."""
    try:
        return fmean(values)
    except (OverflowError, ValueError):
        return sum(v / len(values) for v in values)   # plain float sums never raise
