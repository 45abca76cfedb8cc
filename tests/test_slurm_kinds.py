"""Node perf, network health and model sweeps end to end on the local real Slurm cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.foreground import EXIT_VERDICT
from tests.simrun import open_store, run, write_scenario
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm

FOUR = "chi[2832,2863,2867-2868]"


async def test_node_perf_finds_the_slow_node(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003, nodes={"chi2863": {"speed": 0.9}})
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "node-perf", "nodes": FOUR})
    assert code == EXIT_VERDICT, lines
    report = "\n".join(lines)
    assert "| chi2863 |" in report and "DEGRADED" in report
    assert "-w chi[2832,2867-2868]" in report


async def test_network_finds_the_bad_link(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003,
                              links=[{"a": "chi2832", "b": "chi2868", "factor": 0.85}])
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "network", "nodes": FOUR,
                                     "expected_tgs": _one_node_tgs(scenario)})
    assert code == EXIT_VERDICT, lines
    assert "bad link between chi2832 and chi2868" in "\n".join(lines)


async def test_model_sweep_flags_the_regression(tmp_path: Path,
                                                slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003,
                              commits={"cand": {"llama2-70b": {"tgs_factor": 0.9}}})
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "model-sweep", "nodes": FOUR, "steps": 15,
                                     "commits": ["main", "cand"],
                                     "matrix": {"llama2-70b": [1, 2]}})
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        sweep = (await store.sweeps())[0]
        assert sweep.verdict is not None
        regressions = sweep.verdict["evaluation"]["regressions"]
        assert sorted(r["key"] for r in regressions) == ["llama2-70b 1N", "llama2-70b 2N"]
    finally:
        await store.close()


def _one_node_tgs(scenario: Path) -> float:
    from sweepd.sim.scenario import load_scenario
    from sweepd.sim.truth import default_batch, true_outcome

    sc = load_scenario(scenario)
    batch = default_batch(sc, "llama2-70b", 1)
    return true_outcome(sc, "llama2-70b", ["chi2863"], {"per_device_batch_size": str(batch)},
                        {}, None).tgs
