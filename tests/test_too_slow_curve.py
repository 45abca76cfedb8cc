"""Issue 22's held-out curve, end to end on the simulator: TGS peaks at batch 7, every
batch up to 30 fits, TGS falls steeply past the peak, and from 17 up the first step takes
longer than the hang limit (at 30 the compiled-memory line says 174.8 of 178.6 GB: the
program fits). Before: 30 was called a silent compile OOM, the pool was lowered by it,
29, 28, ... 24 each 'OOMed' the same way one batch apart, the budget ran out and the
verdict was 5. Now a hang after a line that fits is 'too slow at this batch' (retried
once, an upper bound, no memory lesson) and the search bisects below it."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import sweepd.core.engine as engine_module
from sweepd.app.foreground import EXIT_VERDICT
from sweepd.config import load_config
from sweepd.kinds.model_perf.params import swept_value
from sweepd.monitor.classify import TOO_SLOW
from tests.simrun import open_store, perf_spec, run, write_scenario

PEAK_AT_7 = {"llama2-70b": {"max_batch": 30, "peak_batch": 7, "peak_tgs": 1400, "nodes": 2}}


async def test_a_steep_fall_past_an_interior_peak_reaches_the_peak(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Which batches are too slow is set by the hang limit itself (a first step longer than
    # it): the floor is not stretched by the machine's load here, or under load 17-30
    # would pass slowly and the search would take other runs.
    monkeypatch.setattr(engine_module, "crowding", lambda: 1.0)
    scenario = write_scenario(tmp_path, models=PEAK_AT_7)
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "daemon.tick_s": 0.1, "daemon.hang_floor_wall_s": 1.5,
                                "cluster.sim": {"scenario": str(scenario)}})
    code, lines = await run(config, perf_spec(nodes="chi[2832,2863]"))
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        verdict = (await store.sweeps.get(1)).verdict
        runs = await store.runs.of_sweep(1)
        jobs = await store.jobs.of_sweep(1)
        events = await store.events.of_sweep(1)
    finally:
        await store.close()
    batches = [int(swept_value("per_device_batch_size", r.params) or 0) for r in runs]
    seen = [(b, r.outcome) for b, r in zip(batches, runs, strict=True)]
    assert verdict["best"] == 7, seen
    assert len(runs) <= 8, seen
    # Never one batch at a time toward a failure: no two failures one batch apart.
    failed = sorted(b for b, r in zip(batches, runs, strict=True) if r.outcome != "pass")
    assert all(b - a > 1 for a, b in itertools.pairwise(failed)), seen
    # Every failure here is a hang after the program fitted: retried once, then 'hang'.
    assert failed and all(r.outcome == "hang" for r in runs if r.outcome != "pass"), seen
    # Each failed run: its job and the one retry, both hung. (A passed run may also hold a
    # retried hang when a loaded machine slows its first step past the wall floor; it is
    # judged by its retry, as a person's would be.)
    for run_ in (r for r in runs if r.outcome != "pass"):
        tries = [j.failure_class for j in jobs if j.run_id == run_.id]
        assert tries == ["hang", "hang"], (run_.label, tries)
    reasons = " ".join(e.reason or "" for e in events)
    # Classified by the too-slow rule (a hang after a line that fits), not as an OOM.
    too_slow = re.escape(TOO_SLOW).replace(re.escape("{total:.1f}"), r"[\d.]+") \
        .replace(re.escape("{pool:.1f}"), r"[\d.]+")
    hung = [j for j in jobs if j.failure_class == "hang"]
    assert hung and all(re.fullmatch(too_slow, j.failure_detail or "") for j in hung), \
        [j.failure_detail for j in hung]
    assert "lowered by" not in reasons   # no lesson for the memory model
