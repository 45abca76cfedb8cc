"""One whole log in, what sweepd makes of it out: the facts the engine stores from its lines
and the verdict the engine's classifier gives them. Pure: the caller reads the file.

The lines go through `parse.parse_line` and the facts are folded as the engine folds them
(core/log_facts: rank 0's or unprefixed steps, memory lines and phase; the signals in log
order; the node map from `JOB_NODELIST`), then `classify.classify` judges them. What the log
cannot say is taken as a job that ended by itself: the scheduler's COMPLETED, or FAILED with
a non-zero exit code the caller knows. Its steps as the log's own MaxText config printed
them (`Config param steps: 15`), where the caller gives none.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from sweepd.monitor.classify import JobFacts, classify, node_map_from_nodelist
from sweepd.monitor.facts import (
    CompiledMemoryFact,
    FailureClass,
    HeaderFact,
    MemstatsFact,
    NodeExitFact,
    Phase,
    SignalFact,
    StepFact,
    SummaryFact,
    Verdict,
)
from sweepd.monitor.parse import parse_line
from sweepd.monitor.signatures import EXCEPTION_DETAIL
from sweepd.monitor.steady import STEADY_LAST, mean, steady_steps, steady_window

DEFAULT_STEPS = 15   # a spec's default `steps`
# Bounds, whatever the log: the steps a window can hold are kept (the rest only counted),
# and each class's first signals per rank (the earliest of a class is what classify takes).
_SIGNALS_KEPT = 100
# MaxText prints its whole config, `steps` among it (absl-prefixed on TPU).
_CONFIG_STEPS = re.compile(r"\bConfig param steps: ([0-9]{1,9})\s*$")
# MaxText prints its profiler setting (`Config param profiler: ProfilerType.XPLANE`, or
# `ProfilerType.NONE`): a log that says it ran profiled is read with the profiler's window.
_CONFIG_PROFILER = re.compile(r"\bConfig param profiler: (?:ProfilerType\.)?(xplane|nsys)\s*$",
                              re.IGNORECASE)
_PHASE_ORDER = list(Phase)


@dataclass(frozen=True)
class Failure:
    """The verdict with where it came from: the log line (1-based) and what an OOM named."""

    verdict: Verdict
    line_number: int | None = None
    required_gb: float | None = None     # an OOM that named what it needed (GiB)
    available_gb: float | None = None    # … and what the device had


@dataclass(frozen=True)
class LogReading:
    steps: dict[int, StepFact]            # rank 0's (or unprefixed) first line of steps 0-14
    last_step: int | None                 # the highest step any of its lines completed
    expected_steps: int
    profiler: bool
    window: tuple[int, ...]               # the steps the steady TGS was taken over
    fallback: bool                        # the run had none of the window's steps
    compiled: CompiledMemoryFact | None   # the last compiled-memory line (rank 0's)
    memstats: MemstatsFact | None         # the last Memstats line (rank 0's)
    phase: Phase
    failure: Failure                      # verdict.klass None: the run passed

    @property
    def tgs_median(self) -> float | None:
        values = [self.steps[s].tgs for s in self.window]
        return statistics.median(values) if values else None

    @property
    def tgs_mean(self) -> float | None:
        """What the engine records for the run (the SKILL.md's mean)."""
        values = [self.steps[s].tgs for s in self.window]
        return mean(values) if values else None


@dataclass
class _Fold:
    steps: dict[int, StepFact] = field(default_factory=dict)
    last_step: int | None = None
    kept: dict[tuple[object, ...], int] = field(default_factory=dict)
    signals: list[tuple[int, SignalFact]] = field(default_factory=list)
    node_exits: list[NodeExitFact] = field(default_factory=list)
    node_map: dict[int, str] = field(default_factory=dict)
    summary: SummaryFact | None = None
    compiled: CompiledMemoryFact | None = None
    memstats: MemstatsFact | None = None
    phase: Phase = Phase.PROLOG
    config_steps: int | None = None
    config_profiler: bool = False

    def reach(self, phase: Phase) -> None:
        if _PHASE_ORDER.index(phase) > _PHASE_ORDER.index(self.phase):
            self.phase = phase

    def add(self, number: int, line: str) -> None:
        self.reach(Phase.PREFLIGHT)   # the log exists
        if "Config param steps:" in line and (m := _CONFIG_STEPS.search(line)):
            self.config_steps = int(m.group(1))
            return
        if "Config param profiler:" in line:
            self.config_profiler = bool(_CONFIG_PROFILER.search(line))
            return
        fact = parse_line(line)
        own = getattr(fact, "rank", None) in (None, 0)
        if isinstance(fact, StepFact):
            if own:
                if fact.step <= STEADY_LAST:
                    self.steps.setdefault(fact.step, fact)
                self.last_step = max(fact.step, self.last_step or 0)
                self.reach(Phase.TRAINING)
        elif isinstance(fact, SignalFact):
            key = (fact.klass, fact.rank, fact.detail == EXCEPTION_DETAIL)
            self.kept[key] = self.kept.get(key, 0) + 1
            if self.kept[key] <= _SIGNALS_KEPT:
                self.signals.append((number, fact))
        elif isinstance(fact, MemstatsFact) and own:
            self.memstats = fact
            self.reach(Phase.COMPILE)
        elif isinstance(fact, CompiledMemoryFact) and own:
            self.compiled = fact
        elif isinstance(fact, SummaryFact):
            self.summary = fact
            self.reach(Phase.SUMMARY)
        elif isinstance(fact, NodeExitFact):
            self.node_exits.append(fact)
        elif isinstance(fact, HeaderFact) and fact.key == "JOB_NODELIST":
            self.node_map = node_map_from_nodelist(fact.value)


def read_log(lines: Iterable[str], *, expected_steps: int | None = None,
             profiler: bool = False, exit_code: int | None = None) -> LogReading:
    """What sweepd makes of a whole log (`lines` in order, without their newlines)."""
    fold = _Fold()
    for number, line in enumerate(lines, start=1):
        fold.add(number, line)
    steps = expected_steps if expected_steps is not None else (
        fold.config_steps if fold.config_steps is not None else DEFAULT_STEPS)
    profiler = profiler or fold.config_profiler
    chosen = steady_steps(fold.steps.values(), profiler, fallback=True)
    window = tuple(chosen)
    summary_exit = fold.summary.exit_code if fold.summary is not None else None
    code = summary_exit if summary_exit is not None else exit_code
    facts = JobFacts(
        signals=fold.signals, node_map=fold.node_map, phase=fold.phase,
        last_step=fold.last_step, expected_steps=steps,
        summary=fold.summary, node_exits=fold.node_exits,
        scheduler_state="FAILED" if code not in (None, 0) else "COMPLETED",
        exit_code=code,
        compiled_gb=(fold.compiled.total_gb, fold.memstats.limit_gb)
        if fold.compiled is not None and fold.memstats is not None else None)
    return LogReading(
        steps=dict(sorted(fold.steps.items())), last_step=fold.last_step,
        expected_steps=steps, profiler=profiler,
        window=window, fallback=bool(window) and window[0] not in steady_window(profiler),
        compiled=fold.compiled, memstats=fold.memstats, phase=fold.phase,
        failure=_failure(classify(facts), fold.signals))


def _failure(verdict: Verdict, signals: list[tuple[int, SignalFact]]) -> Failure:
    """The verdict, with the line that proved it and what an OOM line named."""
    proof = next(((n, s) for n, s in signals if s.text == verdict.evidence), None)
    if proof is None:
        return Failure(verdict)
    number, signal = proof
    if verdict.klass is not FailureClass.OOM:
        return Failure(verdict, number)
    return Failure(verdict, number, signal.required_gb, signal.available_gb)
