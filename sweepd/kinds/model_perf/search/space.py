"""What a batch search is over and what it has seen: the values (SearchSpace), the runs
(Probe, Outcome), a chosen step (Step), and the constants every rule reads."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from sweepd.kinds.model_perf.thresholds import THRESHOLDS
from sweepd.monitor.noise import Noise

Value = int | float | str

# The numbers every rule reads, named as the rules name them; each is defined once, with
# what it means, in `model_perf/thresholds.py` (the spec and the docs read it too).
START_FRACTION = THRESHOLDS.start_fraction
CLIMB = THRESHOLDS.climb
TOLERANCE = THRESHOLDS.tolerance
NOISE = THRESHOLDS.noise
FLAT = THRESHOLDS.flat
MAX_BATCH = THRESHOLDS.max_batch
STEP_NOISE = THRESHOLDS.step_noise
STEP_SHARE = THRESHOLDS.step_share
BOTTOM_STEP = THRESHOLDS.bottom_step
DESCENT_AIM = THRESHOLDS.descent_aim
OOM_MARGIN_GB = THRESHOLDS.oom_margin_gb
SECANT_NOISE = THRESHOLDS.secant_noise
STEP_TIME_NOISE = THRESHOLDS.step_time_noise
ALIGN_SLACK = THRESHOLDS.align_slack
ALIGN_MAX = THRESHOLDS.align_max
ALIGN_NOISE = THRESHOLDS.align_noise
LADDER_STEP = THRESHOLDS.ladder_step
LADDER_FLOOR = THRESHOLDS.ladder_floor
LADDER_DEPTH = THRESHOLDS.ladder_depth
LADDER_VALLEY = THRESHOLDS.ladder_valley
LADDER_GAP = THRESHOLDS.ladder_gap
MEMORY_MARGIN = THRESHOLDS.memory_margin
NODE_VARIANCE = THRESHOLDS.node_variance
PRIOR_DRIFT = THRESHOLDS.prior_drift
PRIOR_SHAPE = THRESHOLDS.prior_shape


class Outcome(StrEnum):
    OK = "ok"
    OOM = "oom"
    FAILED = "failed"  # a silent OOM (a compile hang before the memory line) etc.
    # Hung twice after its compiled-memory line said the program fits: too slow at this
    # batch. An upper bound from throughput (a larger batch is slower still), never a
    # lesson for the memory model.
    SLOW = "slow"


@dataclass(frozen=True)
class Probe:
    value: Value
    outcome: Outcome
    tgs: float | None
    # What the run's log said about memory (GB as printed); None when it did not say.
    temp_gb: float | None = None  # compiled Temp size: grows with the batch
    fixed_gb: float | None = None  # compiled Total - Temp: params, optimizer state, outputs
    limit_gb: float | None = None  # the pool (Memstats `Using (GB) … / limit`)
    alloc_gb: float | None = None  # the allocation an OOM failed on
    # What an OOM said it needed and what the device had (a TPU's `… required … (19.02G)
    # exceeds available HBM (15.75G)`): both sizes, so they bound the largest fit.
    required_gb: float | None = None
    available_gb: float | None = None
    earlier: bool = False  # an earlier sweep's run, standing in for one not run here

    @property
    def silent(self) -> bool:
        """A failure that names no allocation size: where memory ran out is unknown."""
        return self.outcome is not Outcome.OK and self.alloc_gb is None


@dataclass(frozen=True)
class SearchSpace:
    candidates: tuple[Value, ...]
    estimate_index: int | None
    ordered: bool = True
    estimate_source: str = "the memory estimate"  # named in the first probe's reason
    start: Value | None = None  # the first probe, when an earlier sweep says where to start
    start_why: str = ""
    # An earlier sweep of the same cell: its runs stand in for values this one has not run,
    # their TGS scaled by how this sweep's runs compare with it at the same values.
    prior: tuple[Probe, ...] = ()
    # How far this sweep may read from the prior at a value both ran before the prior's
    # curve no longer holds (`PRIOR_DRIFT`, and the ratios must agree within PRIOR_SHAPE).
    # None: the prior is another setting's runs (remat_step.py: another remat policy), its speed
    # differs by design and is what the ratio measures.
    prior_drift: float | None = PRIOR_DRIFT
    # The value is the work in one step (the batch): a step at a larger value never takes
    # less time, so TGS at b is at most TGS at a smaller run a times b / a.
    work_grows: bool = False
    # The curve may have a second peak below the runs (another kernel or schedule taking
    # over at small batches: a valley between two peaks). Off by default: see ladder.
    multi_peak: bool = False
    # The run-to-run TGS noise (relative std) the rules allow for: NOISE, or more where the
    # runs' own steps show them noisier (the kind reads it from each passed run's steady
    # steps). Two runs' noise (FLAT) scales with it, and a gap is settled only when its
    # bound falls that much more below the best (a best read high by the noise).
    noise: float = NOISE
    # Where the noise came from (monitor/noise.py: the prior, the steps, the runs again),
    # `noise` its `decided`; None: `noise` as given (the prior), nothing measured.
    track: Noise | None = None
    # The noise was measured between runs of one value (`repeat.with_run_noise`), beyond
    # what the steps showed: the repeat runs it rests on (1: one pair); 0: not measured so.
    noise_between: int = 0
    # The spec's `measure_noise`: before the verdict the best runs again (`repeat`).
    measure_noise: bool = False
    # The spec's `check_slowdown`: a value run again reading lower than before says the
    # nodes slowed, and the best runs again where that could change the verdict (`slowed`).
    check_slowdown: bool = False
    # A person resumed past a slowdown the runs showed: they are read as one curve again.
    slowdown_seen: bool = False
    # The device's memory (GB; the spec's gpu_memory_gib, else the cluster's): known, the
    # compiled-memory line is evidence, calibrated by the passes, and proves nothing cannot
    # fit (`memory.line_evidence`). None: the line proves, as it always did.
    device_gb: float | None = None

    @property
    def flat(self) -> float:
        return 2 * self.noise

    @property
    def tolerance(self) -> float:
        """How far above the best a gap's bound may reach and still be settled: TOLERANCE
        at the default noise, less by the noise beyond it."""
        return TOLERANCE - max(0.0, self.noise - NOISE)


@dataclass(frozen=True)
class Step:
    value: Value
    why: str  # the bound or prediction that chose it (shown by `explain`)
    repeat: bool = False  # a run for the noise (`repeat`), not for the curve
    # The rule (`model_perf/rules.py`) the run is recorded under: the search's move, a run
    # for the noise (`repeat`) or a check that the runs stayed comparable (`slowed`).
    rule: str | None = None


def batch_space(estimated_max: int, lower: int = 1, upper: int | None = None,
                source: str = "the memory estimate") -> SearchSpace:
    """Every integer batch size in lower..upper (default up to MAX_BATCH): the true optimum
    is an integer, and the search skips what memory and the curve rule out, so a coarser
    grid would only hide the peak."""
    top = MAX_BATCH if upper is None else upper
    if top < lower:
        raise ValueError(f"upper {top} < lower {lower}")
    estimate = min(max(estimated_max, lower), top)
    return SearchSpace(tuple(range(lower, top + 1)), estimate - lower, estimate_source=source,
                       work_grows=True)


def best(probes: Sequence[Probe]) -> Probe | None:
    """The OK probe with the highest TGS (earliest on a tie), or None if nothing ran."""
    ok = [p for p in probes if p.outcome is Outcome.OK and p.tgs is not None]
    return max(ok, key=lambda p: p.tgs or 0.0, default=None)


def best_mean(probes: Sequence[Probe]) -> Probe | None:
    """One setting's runs: the value whose OK runs have the highest mean TGS (earliest on
    a tie), as its latest probe with that mean; None if nothing ran. A value is run more
    than once only where the noise is larger than the rules assume (`repeat`)."""
    runs = means(probes)
    if not runs:
        return None
    top = max(runs.values(), key=mean_tgs)
    return top[0] if len(top) == 1 else replace(top[-1], tgs=mean_tgs(top))


def means(probes: Sequence[Probe]) -> dict[Value, list[Probe]]:
    """The OK probes of each value, in the order the values first ran: a value run again
    (the noise made its neighbours read alike) counts as the mean of its runs."""
    out: dict[Value, list[Probe]] = {}
    for p in probes:
        if p.outcome is Outcome.OK and p.tgs is not None:
            out.setdefault(p.value, []).append(p)
    return out


def mean_tgs(runs: Sequence[Probe]) -> float:
    return statistics.fmean(p.tgs or 0.0 for p in runs)


def is_numeric(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
