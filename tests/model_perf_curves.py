"""The batch search's pure planner swept over a fixed curve (no noise), each run carrying
MaxText's compiled-memory line, and a passed run as the store keeps it: what the search
tests built on one curve share."""

from __future__ import annotations

from collections.abc import Callable

from sweepd.core.states import RunState
from sweepd.kinds.model_perf.search import Outcome, Probe, SearchSpace, best, next_probe
from sweepd.store.rows import Run, RunParams


def sweep_curve(space: SearchSpace, tgs: Callable[[int], float], largest_fit: int,
                temp_gb_per_batch: float, fixed_gb: float, limit_gb: float, max_runs: int
                ) -> tuple[int, list[Probe], list[str]]:
    """Run the search to its end or `max_runs`: the batch it names, its runs, and why each
    ran. A batch above `largest_fit` runs out of memory."""
    probes: list[Probe] = []
    whys: list[str] = []
    while len(probes) < max_runs and (step := next_probe(
            space, probes, runs_left=max_runs - len(probes))) is not None:
        b = int(step.value)
        whys.append(step.why)
        memory = dict(temp_gb=round(temp_gb_per_batch * b, 1), fixed_gb=fixed_gb,
                      limit_gb=limit_gb)
        probes.append(Probe(b, Outcome.OOM, None, alloc_gb=1.0, **memory) if b > largest_fit
                      else Probe(b, Outcome.OK, tgs(b), **memory))
    top = best(probes)
    assert top is not None
    return int(top.value), probes, whys


def passed_run(seq: int, batch: int, tgs: float) -> Run:
    return Run(id=seq, sweep_id=1, seq=seq, label=f"b={batch}",
               params_json=RunParams(overrides={"per_device_batch_size": batch}).to_json(),
               nodes="chi[1-4]", state=RunState.PASSED, outcome="pass", tgs=tgs, mfu=None,
               failure_class=None, detail=None, not_before=None)
