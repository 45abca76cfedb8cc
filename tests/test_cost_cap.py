"""The cost cap: a spec's `max_node_hours` stops a sweep before it submits the job that
would pass it, with its rule recorded; `validate` prints the cap beside the most jobs and
node-hours, or without one the cap the 8 h timebox x the spec's nodes would be."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sweepd.cli.main import main
from sweepd.kinds.parse import parse_spec
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario


async def test_a_sweep_stops_before_the_job_that_would_pass_its_cap(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    # A job here takes a few cluster minutes on 8 nodes: about 1 node-hour each.
    code, lines = await run(config, perf_spec(values=[2, 4, 6, 8, 10, 12],
                                              max_node_hours=1.5))
    assert code == 3, lines   # stopped for a person
    store = await open_store(config)
    try:
        sweep = await store.sweeps.get(1)
        jobs = await store.jobs.of_sweep(1)
        rules = [e.rule for e in await store.events.of_sweep(1)]
    finally:
        await store.close()
    assert sweep.state == "awaiting_decision" and "budget.node_hours" in rules
    assert "max_node_hours 1.5" in (sweep.reason or "")
    submitted = [j for j in jobs if j.backend_id is not None]
    assert 1 <= len(submitted) < 6
    assert jobs[-1].backend_id is None and jobs[-1].state == "failed"


def test_the_suggested_cap_is_the_timebox_on_every_node() -> None:
    spec = parse_spec(perf_spec())
    assert spec.node_hour_cap() is None and spec.default_cap() == 8.0 * len(spec.node_list)
    assert parse_spec(perf_spec(max_node_hours=20)).node_hour_cap() == 20


def test_validate_prints_the_cap_beside_the_most(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(perf_spec(max_node_hours=12.5)))
    assert main(["validate", str(path)]) == 0
    most = [line for line in capsys.readouterr().out.splitlines() if line.startswith("at most")]
    assert most and most[0].endswith("; capped at 12.5 node-hours (max_node_hours)"), most
    path.write_text(yaml.safe_dump(perf_spec()))
    assert main(["validate", str(path)]) == 0
    most = [line for line in capsys.readouterr().out.splitlines() if line.startswith("at most")]
    assert most and most[0].endswith("; no node-hour cap (none set; the 8 h timebox x 8 "
                                     "nodes would be max_node_hours: 64)"), most
