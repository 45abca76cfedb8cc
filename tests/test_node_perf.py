"""Node perf sweeps: the planner over recorded runs, the report, the plot, and a whole sweep
on the simulated cluster with a known slow node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hostlist
import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import Finished, SweepContext
from sweepd.kinds.node_perf import report
from sweepd.kinds.node_perf.plan import band, plan
from sweepd.kinds.node_perf.plot import node_perf_plot
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.store.rows import Run, RunParams, Sweep
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import NODES, open_store, run, sim_config, write_scenario

# 8 trainers start at once on a shared 2-core machine: at time_scale 0.002 the default
# 600 s hang limit is 1.2 s of wall time, less than a loaded interpreter needs to start.
HANG_S = 5000

FOUR = ["chi2832", "chi2863", "chi2867", "chi2868"]


def _run(i: int, label: str, node: str, tgs: float | None, state: str = "passed") -> Run:
    outcome = None if state in ("pending", "active") else ("pass" if tgs is not None else "hang")
    return Run(id=i, sweep_id=1, seq=i, label=label, params_json="{}", nodes=node,
               state=RunState(state), outcome=outcome, tgs=tgs, mfu=None, failure_class=None,
               detail=None, not_before=None)


def _ctx(runs: list[Run]) -> SweepContext:
    return SweepContext(runs=runs, nodes=FOUR, gpu_memory_gib=192, facts=None)


def _spec(**extra: Any) -> Any:
    return parse_spec({"kind": "node-perf", "nodes": "chi[2832,2863,2867-2868]", **extra})


def test_bands_follow_the_skill() -> None:
    assert [band(d) for d in (0.03, 0.0, -0.019, -0.021, -0.049, -0.05, -0.2)] == \
        ["healthy", "healthy", "healthy", "marginal", "marginal", "degraded", "degraded"]


def test_one_run_per_node_all_at_once_pinned_and_isolated() -> None:
    new = plan(_spec(), _ctx([]))
    assert isinstance(new, list) and [r.label for r in new] == [f"node={n}" for n in FOUR]
    assert [list(r.nodes) for r in new] == [[n] for n in FOUR]
    assert all(r.params == RunParams(alias=r.nodes[0], overrides={"dataset_type": "synthetic"})
               for r in new)
    own = plan(_spec(overrides={"dataset_type": "tfds"}), _ctx([]))
    assert isinstance(own, list) and own[0].params.overrides == {}


def test_outliers_are_confirmed_by_a_second_run_before_the_verdict() -> None:
    runs = [_run(1, "node=chi2832", "chi2832", 1000.0), _run(2, "node=chi2863", "chi2863", 1002),
            _run(3, "node=chi2867", "chi2867", 960.0), _run(4, "node=chi2868", "chi2868", 900.0)]
    # Still waiting on one baseline: nothing new yet.
    assert plan(_spec(), _ctx([*runs[:3], _run(4, "node=chi2868", "chi2868", None,
                                                "active")])) == []
    confirm = plan(_spec(), _ctx(runs))
    assert isinstance(confirm, list)
    assert sorted(r.label for r in confirm) == ["node=chi2867#2", "node=chi2868#2"]
    assert all("until a second run agrees" in r.reason for r in confirm)
    # chi2867 is fine the second time (cleared); chi2868 is slow again (confirmed).
    done = plan(_spec(), _ctx([*runs, _run(5, "node=chi2867#2", "chi2867", 999.0),
                               _run(6, "node=chi2868#2", "chi2868", 905.0)]))
    assert isinstance(done, Finished) and done.ok
    by_node = {n["node"]: n for n in done.verdict["nodes"]}
    assert by_node["chi2867"]["status"] == "healthy"
    assert by_node["chi2868"]["status"] == "degraded" and by_node["chi2868"]["confirmed"]
    assert by_node["chi2868"]["runs"] == [900.0, 905.0]
    assert done.verdict["excluded"] == ["chi2868"]
    assert done.verdict["healthy"] == "chi[2832,2863,2867]"


def test_a_hung_node_is_unhealthy_without_a_rerun_and_reference_catches_a_slow_cluster() -> None:
    runs = [_run(1, "node=chi2832", "chi2832", 1000.0), _run(2, "node=chi2863", "chi2863", 1001),
            _run(3, "node=chi2867", "chi2867", 999.0), _run(4, "node=chi2868", "chi2868", None,
                                                            "failed")]
    done = plan(_spec(reference_tgs=1150), _ctx(runs))
    assert isinstance(done, Finished)
    assert [n["status"] for n in done.verdict["nodes"]] == ["healthy"] * 3 + ["unhealthy"]
    assert done.verdict["nodes"][3]["failure"] == "hang"   # why, not only that
    assert done.verdict["cluster_slow"] and done.verdict["cluster_delta"] < -0.05
    assert "slow as a whole" in done.summary
    assert plan(_spec(reference_tgs=1010), _ctx(runs)).verdict["cluster_slow"] is False  # type: ignore[union-attr]


def test_spec_rejects_multi_node_models_and_unknown_fields() -> None:
    with pytest.raises(SpecError):
        _spec(model="grok-1")
    with pytest.raises(SpecError):
        _spec(reference=3)


def test_plot_is_a_png_with_one_bar_per_node() -> None:
    png = node_perf_plot([("a", 1000.0, "healthy"), ("b", 930.0, "degraded"),
                          ("c", None, "unhealthy")], 1000.0)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000


def _sweep(runs_spec: dict[str, Any]) -> Sweep:
    return Sweep(id=1, kind="node-perf", name="n", spec_json=json.dumps(runs_spec),
                 state=SweepState.RUNNING, reason=None, verdict_json=None, created_at="",
                 updated_at="")


def test_report_table_while_running_and_reference_column() -> None:
    spec = {"kind": "node-perf", "nodes": "chi[2832,2863]", "reference_tgs": 1000.0}
    runs = [_run(1, "node=chi2832", "chi2832", 990.0),
            _run(2, "node=chi2863", "chi2863", None, "active")]
    text = report.markdown(_sweep(spec), runs, [])
    # A row per node, the pending one blank, with a vs. reference column.
    check_golden(GOLDEN / "node_perf" / "report_running_with_reference.txt", text + "\n")


async def test_sim_sweep_finds_the_slow_node_and_confirms_it(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path, nodes={"chi2868": {"speed": 0.92}, "chi2863": {"speed": 0.965}},
        faults=[{"kind": "hsa_error", "node": "chi2881"}])
    config = sim_config(tmp_path, scenario, hang_timeout_s=HANG_S)
    code, lines = await run(config, {"kind": "node-perf", "nodes": NODES})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.state == SweepState.DONE and sweep.verdict is not None
        runs = await store.runs.of_sweep(sweep.id)
        labels = sorted(r.label for r in runs)
        assert labels == sorted([f"node={n}" for n in expand_nodes(NODES)]
                                + ["node=chi2863#2", "node=chi2868#2"])
        status = {n["node"]: n["status"] for n in sweep.verdict["nodes"]}
        assert status.pop("chi2868") == "degraded"
        assert status.pop("chi2863") == "marginal"
        assert status.pop("chi2881") == "unhealthy"
        assert set(status.values()) == {"healthy"}
        # The fault is the node's verdict: nothing excluded, no retry elsewhere.
        assert await store.exclusions.of_sweep(sweep.id) == []
        usable = hostlist.expand_hostlist(sweep.verdict["healthy"])
        assert "chi2868" not in usable and "chi2881" not in usable and "chi2863" in usable
        table = "\n".join(lines)
        assert "| chi2868 |" in table and "DEGRADED (runs:" in table
        assert "UNHEALTHY (gpu_hardware)" in table   # the HSA error, named
        assert f"`-w {sweep.verdict['healthy']}`" in table
    finally:
        await store.close()
