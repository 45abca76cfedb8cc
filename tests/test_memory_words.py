"""Issue 47 items 6, 10 and 11 (a new user on one TPU chip): an OOM that prints its own sizes
bounds the search (never one batch down a run); the pool's source is said; TPU words (HBM,
the person's own overrides, the compiled memory); and the smaller fixes (progress past a
resume, `report` with the daemon stopped, the cleanup command, "best measured")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweepd.app.progress import progress_line, sweep_progress
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    SearchSpace,
    batch_space,
    best,
    next_probe,
)
from sweepd.kinds.model_perf.search.memory import SizedOom, memory_fit
from sweepd.store.rows import Run, Sweep
from sweepd.store.states import RunState, SweepState

HBM = 15.75


def _need(b: int, under: float) -> float:
    """The chip's 0.27 B model (reference/tpu): 3.0 GB arguments, temp 1.18 + 0.219 GB a
    batch; the run needs `under` times what its compiled-memory line says."""
    return (3.0 + 1.18 + 0.219 * b) * under


def _tgs(b: int) -> float:
    return 64000.0 * b / (b + 1.5) * (1 - 0.002 * max(0, b - 24))


def _search(space: SearchSpace, under: float, max_runs: int = 12) -> list[Probe]:
    """The search to its end on a chip whose compile-time OOM prints its own sizes
    (`… required … (need) exceeds available HBM (15.75G)`) and no memory line."""
    probes: list[Probe] = []
    while len(probes) < max_runs and (step := next_probe(
            space, probes, runs_left=max_runs - len(probes))) is not None:
        b = int(step.value)
        need = _need(b, under)
        if need <= HBM:
            probes.append(Probe(b, Outcome.OK, _tgs(b), temp_gb=round(1.18 + 0.219 * b, 1),
                                fixed_gb=3.0, limit_gb=HBM))
        else:
            probes.append(Probe(b, Outcome.OOM, None, alloc_gb=need, required_gb=need,
                                available_gb=HBM))
    return probes


@pytest.mark.parametrize("device", [None, HBM])
def test_an_oom_with_its_own_sizes_is_never_walked_down_one_batch_a_run(
        device: float | None) -> None:
    # The line under-states by 10 %: before, 53, 52, 51, ... 47 each ran out of memory.
    space = replace(batch_space(1, 1, 64), start=1, device_gb=device)
    probes = _search(space, under=1.1)
    ooms = [int(p.value) for p in probes if p.outcome is Outcome.OOM]
    assert len(ooms) <= 2, [p.value for p in probes]
    top = best(probes)
    assert top is not None and top.tgs is not None
    truth = max(_tgs(b) for b in range(1, 65) if _need(b, 1.1) <= HBM)
    assert top.tgs >= 0.99 * truth


def test_the_first_probe_out_of_memory_scales_the_next_by_its_sizes() -> None:
    # Given values, no line yet: 32 needs 29.8 GB of 15.75; the next probe is scaled by
    # available / required (never 75 % of 32, which ran out again).
    space = SearchSpace(tuple(range(1, 65)), None, work_grows=True, device_gb=None)
    oom = Probe(32, Outcome.OOM, None, required_gb=29.78, available_gb=HBM)
    step = next_probe(space, [oom])
    assert step is not None and int(step.value) <= 32 * HBM / 29.78
    fit = memory_fit([oom])
    assert fit is not None and fit.cap == pytest.approx(32 * HBM / 29.78)


def test_the_sizes_scale_the_passes_line_to_what_the_oom_needed() -> None:
    oom = SizedOom(53, 17.37, HBM)
    # The passes' line reads 15.79 GB at 53: it under-states by 17.37 / 15.79.
    assert oom.aim(0.219, 4.18) == pytest.approx((HBM * 0.99 / (17.37 / 15.787) - 4.18)
                                                 / 0.219, rel=1e-3)
    assert oom.cap == pytest.approx(53 * HBM / 17.37)


def _sweep(state: SweepState, spec: str) -> Sweep:
    return Sweep(1, "model-perf", "s", spec, state, None, None, "2026-12-06T00:00:00+00:00",
                 "2026-12-06T00:10:00+00:00")


def _run(i: int, state: RunState) -> Run:
    return Run(i, 1, i, f"b={i}", '{"overrides": {"per_device_batch_size": 1}}', "box1",
               state, "pass", 1.0, None, None, None, None)


def test_progress_after_a_resume_past_the_most_says_so() -> None:
    runs = [_run(i, RunState.PASSED) for i in range(1, 15)] + [_run(15, RunState.ACTIVE)]
    p = sweep_progress(_sweep(SweepState.RUNNING, '{"max_runs": 12}'), runs, [])
    assert p["runs_most"] >= p["runs_started"] == 15 and p["runs_planned"] == 12
    assert "of ≤ 12" not in p["line"] and progress_line(p).startswith(
        "run 15 (past the 12 planned")
