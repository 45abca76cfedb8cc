"""The compiled-memory line is evidence, not a cliff, where the device's memory is known
(search/memory.py `line_evidence`): on a TPU v5e MaxText's estimate read 16.2 GB at batch 56
and 18.0 at 64, over the chip's 15.75 GiB, and both trained all their steps; 80 did not
compile. A search that took the line as proof never ran the batches over it. Here the line
is calibrated by such passes, and only a failed run bounds the search; where the line is
right (a GPU's), the search runs as it did."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    best,
    next_probe,
    why_not_run,
)
from tests.golden_files import GOLDEN, check_golden_cases

HBM = 15.75
FIXED = 3.0
CHIP_VALUES = (1, 4, 8, 12, 16, 24, 32, 48, 56, 64, 80)
# The chip's memory line (total GB) as recorded at 1, 8, 48, 56, 64; linear between.
CHIP_LINE = {1: 4.4, 8: 6.1, 48: 14.7, 56: 16.2, 64: 18.0}


def chip_line(b: float) -> float:
    if b in CHIP_LINE:
        return CHIP_LINE[b]
    points = sorted(CHIP_LINE)
    lo = max((p for p in points if p < b), default=points[0])
    hi = min((p for p in points if p > b), default=points[-1])
    if lo == hi:
        lo, hi = points[-2], points[-1]
    return CHIP_LINE[lo] + (CHIP_LINE[hi] - CHIP_LINE[lo]) * (b - lo) / (hi - lo)


Sweep = tuple[int, list[Probe], list[str]]


def sweep(space: SearchSpace, tgs: Callable[[int], float], fits: Callable[[int], bool],
          line: Callable[[float], float], fixed: float, pool: float, alloc: float,
          max_runs: int = 12) -> Sweep:
    """The search to its end: each run prints its compiled-memory line (total `line(b)`)
    and Memstats' pool; a batch that does not fit OOMs naming `alloc` GB."""
    probes: list[Probe] = []
    whys: list[str] = []
    while len(probes) < max_runs and (step := next_probe(
            space, probes, runs_left=max_runs - len(probes))) is not None:
        b = int(step.value)
        whys.append(step.why)
        memory = dict(temp_gb=round(line(b) - fixed, 1), fixed_gb=fixed, limit_gb=pool)
        probes.append(Probe(b, Outcome.OK, tgs(b), **memory) if fits(b)
                      else Probe(b, Outcome.OOM, None, alloc_gb=alloc, **memory))
    top = best(probes)
    assert top is not None
    return int(top.value), probes, whys


def rising_to_64(b: int) -> float:
    """The chip's flat curve, but still rising at 64: the best is a batch whose line reads
    over the device's memory."""
    return 60000 + 80 * b


def chip_sweep(device: float | None, tgs: Callable[[int], float] = rising_to_64,
               values: Sequence[int] = CHIP_VALUES) -> Sweep:
    space = SearchSpace(tuple(values), None, work_grows=True, device_gb=device)
    return sweep(space, tgs, lambda b: b < 80, chip_line, FIXED, HBM, alloc=1.82)


def test_the_best_over_the_line_is_reached_on_the_chips_values() -> None:
    found, probes, whys = chip_sweep(device=HBM)
    assert found == 64
    ran = {int(p.value): p.outcome for p in probes}
    assert ran[56] is Outcome.OK and ran[64] is Outcome.OK
    assert all(v < 80 or o is Outcome.OOM for v, o in ran.items())
    # The step past a pass over the pool names the calibration.
    assert any("over-states memory" in w for w in whys), whys


def test_taken_as_proof_the_line_stops_short_of_it() -> None:
    """The device's memory unknown: today's rule, the line proves 56 and up cannot fit."""
    found, probes, _ = chip_sweep(device=None)
    assert found < 56 and not any(int(p.value) >= 56 for p in probes)
    said = why_not_run(SearchSpace(CHIP_VALUES, None, work_grows=True), probes, [56, 64])
    assert "predicts it does not fit" in (said[64] or "")


def test_the_chips_own_curve_still_finds_12() -> None:
    """The chip's curve (best 12, flat above 4): the line does not move the peak."""
    chip = {1: 43103, 4: 61000, 8: 64350, 12: 66000, 16: 64350, 24: 65010, 32: 64700,
            48: 64200, 56: 63400, 64: 64000}
    found, probes, _ = chip_sweep(device=HBM, tgs=lambda b: chip[b])
    assert found == 12
    assert {8, 12} <= {int(p.value) for p in probes}


def test_every_integer_batch_reaches_a_best_over_the_line() -> None:
    """All integers: the first probe at 75% of the estimate, then past a pass over the pool
    the climb is geometric or bisects toward the OOM, never one batch a run."""
    space = batch_space(48, 1, 128, source="the memory estimate")
    space = SearchSpace(space.candidates, space.estimate_index, work_grows=True,
                        device_gb=HBM)

    def line(b: float) -> float:
        return 4.2 + 0.215 * b     # 56 -> 16.2, 64 -> 18.0 GB

    found, probes, whys = sweep(space, lambda b: 60000 + 60 * b - 0.3 * b * b if b <= 72
                                else 0.0, lambda b: b <= 72, line, FIXED, HBM, alloc=1.0)
    check_golden_cases(GOLDEN / "model_perf_memory" / "first_probe_on_a_chip.txt",
                       {"first": whys[0]})
    assert int(probes[0].value) in (36, 40)   # 75% of 48, moved to a multiple of 8
    assert found >= 60 and line(found) > HBM, (found, [p.value for p in probes])
    assert len(probes) <= 12


def test_a_value_over_the_line_is_never_said_not_to_fit_without_a_run() -> None:
    space = SearchSpace(CHIP_VALUES, None, work_grows=True, device_gb=HBM)
    probes = [Probe(v, Outcome.OK, 60000 + 80 * v, temp_gb=round(chip_line(v) - FIXED, 1),
                    fixed_gb=FIXED, limit_gb=HBM) for v in (24, 48)]
    said = why_not_run(space, probes, [56, 64, 80])
    assert not any("does not fit" in (s or "").replace("no run said it does not fit", "")
                   for s in said.values()), said
    assert "estimate" in (said[64] or "") or said[64] is None


# A GPU-like cluster where the line is right: 178.5 GB pool, the line's total within it
# up to the largest fit, an OOM above.
POOL = 178.5
GPU_FIXED = 60.0
SLOPE = 9.0        # GB per batch


def gpu_line(b: float) -> float:
    return GPU_FIXED + SLOPE * b


GPU_MAX = int((POOL - GPU_FIXED) / SLOPE)    # 13: 177 GB fits, 14 needs 186


def gpu_sweep(tgs: Callable[[int], float], device: float | None) -> Sweep:
    space = batch_space(16, 1, None)
    space = SearchSpace(space.candidates, space.estimate_index, work_grows=True,
                        device_gb=device)
    return sweep(space, tgs, lambda b: b <= GPU_MAX, gpu_line, GPU_FIXED, POOL, alloc=4.0)


def interior(b: int) -> float:
    return 1400 * (1 - 0.02 * (b - 9) ** 2 / 9)


def test_where_the_line_is_right_an_interior_peak_runs_as_before() -> None:
    known = gpu_sweep(interior, device=192)
    unknown = gpu_sweep(interior, device=None)
    assert known[0] == unknown[0] == 9
    assert [p.value for p in known[1]] == [p.value for p in unknown[1]]
    assert known[2][0] == unknown[2][0] and "75%" in known[2][0]


def test_where_the_line_is_right_a_peak_at_the_cliff_costs_one_oom() -> None:
    """Rising to the largest fit: the line said 14 cannot fit; now one run says so (an OOM
    at compile), and nothing else changes."""
    def rising(b: int) -> float:
        return 100.0 * b ** 0.5

    known = gpu_sweep(rising, device=192)
    unknown = gpu_sweep(rising, device=None)
    assert known[0] == unknown[0] == GPU_MAX
    extra = [p for p in known[1] if p not in unknown[1]]
    assert [(p.value, p.outcome) for p in extra] == [(GPU_MAX + 1, Outcome.OOM)]
    assert [p for p in known[1] if p in unknown[1]] == unknown[1]
