"""A failure at a batch below one that already ran says nothing about memory (memory grows
with the batch): it must not cap the search. Here a one-off compile hang at 12 (counted as
an OOM, as the SKILL.md says) came after 14 had run, and the search stopped at 14 without
trying 13, the true peak."""

from __future__ import annotations

from pathlib import Path

from sweepd.app.foreground import EXIT_VERDICT
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario


async def test_a_one_off_failure_below_a_pass_does_not_cap_the_search(tmp_path: Path) -> None:
    faults = [{"kind": "hang", "phase": "compile", "model": "llama2-70b", "batch": 12,
               "times": 1}]
    scenario = write_scenario(tmp_path, faults=faults, models={
        "llama2-70b": {"max_batch": 14, "peak_batch": 13, "peak_tgs": 1400}})
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(nodes="chi[2832,2867-2868]"))
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        verdict = (await store.sweep(1)).verdict
        runs = await store.runs(1)
    finally:
        await store.close()
    assert verdict["best"] == 13, (verdict, [(r.label, r.outcome) for r in runs])
