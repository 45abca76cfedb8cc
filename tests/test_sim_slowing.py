"""The simulated cluster's node that slows from its k-th job on (`slows_from_job`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.sim.player import JobMeta
from sweepd.sim.scenario import Scenario, ScenarioError, load_scenario
from sweepd.sim.trainer import build_input
from tests.simrun import write_scenario

NODES = ("chi2832", "chi2863")


def _scenario(tmp_path: Path) -> Scenario:
    return load_scenario(write_scenario(tmp_path, nodes={
        "chi2863": {"slows_from_job": 3, "slowed_speed": 0.93}}))


def _tgs(scenario: Scenario, state: Path, job: str, nodes: tuple[str, ...] = NODES) -> float:
    meta = JobMeta(job, "perf", "llama2-70b", nodes, ("per_device_batch_size=8",))
    truth = build_input(scenario, state, meta, {"per_device_batch_size": "8"}, {}, None).truth
    assert truth is not None
    return truth.tgs


def test_a_node_runs_slower_from_its_kth_job_on(tmp_path: Path) -> None:
    scenario, state = _scenario(tmp_path), tmp_path / "state"
    first, second, third, fourth = (_tgs(scenario, state, j) for j in ("11", "12", "13", "14"))
    assert first == second
    assert third == pytest.approx(0.93 * first) and fourth == third
    # A job asked about again (another rank, a re-read) keeps its number and its speed.
    assert _tgs(scenario, state, "12") == first and _tgs(scenario, state, "13") == third
    # Jobs are counted per node: three on chi2832 alone leave chi2863's first job at speed.
    other = tmp_path / "other"
    alone = {_tgs(scenario, other, j, ("chi2832",)) for j in ("21", "22", "23")}
    assert len(alone) == 1
    assert _tgs(scenario, other, "24") == first


def test_the_same_scenario_and_jobs_slow_alike_in_a_fresh_state(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    runs = [[_tgs(scenario, tmp_path / s, j) for j in ("1", "2", "3")] for s in ("a", "b")]
    assert runs[0] == runs[1] and runs[0][2] < runs[0][1]


def test_slowing_needs_both_fields(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, nodes={"chi2863": {"slows_from_job": 3}})
    with pytest.raises(ScenarioError, match="go together"):
        load_scenario(path)
    path = write_scenario(tmp_path, nodes={"chi2863": {"slows_from_job": 0,
                                                       "slowed_speed": 0.9}})
    with pytest.raises(ScenarioError, match="slows_from_job"):
        load_scenario(path)
