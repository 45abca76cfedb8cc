"""A trainer that cannot start, on the real local Slurm (issue 47): the simulated trainer's
`environment` fault (a traceback ending `ModuleNotFoundError: No module named 'jax'` on
every rank of a two-node job) stops the sweep after its one job, the line quoted."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm


async def test_an_import_error_stops_a_slurm_sweep_after_one_job(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "environment"}], time_scale=0.003)
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(nodes="chi[2880-2881]"))
    assert code == EXIT_AWAITING_DECISION, lines
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        rules = [e.rule for e in await store.events.of_sweep(1) if e.rule]
        reason = (await store.sweeps.get(1)).reason
    finally:
        await store.close()
    assert [j.failure_class for j in jobs] == ["environment"]
    assert "environment.stop" in rules and "python.retry" not in rules
    assert reason is not None and "ModuleNotFoundError: No module named 'jax'" in reason
