"""`sweepd compare ID ID` (two sweeps side by side, and per value both sweeps' TGS where
both ran) and `report --csv` (one row per run), on a state directory without a daemon as
the other read verbs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from sweepd.cli.main import main
from tests.simrun import perf_spec, run, sim_config, write_scenario


@pytest.fixture
async def two_sweeps(tmp_path: Path) -> Path:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    assert (await run(config, perf_spec(values=[4, 6, 8, 10], use_prior=False)))[0] == 0
    assert (await run(config, perf_spec(values=[6, 10, 12], use_prior=False)))[0] == 0
    return config.daemon.state_dir


def test_report_csv_is_one_row_per_run(two_sweeps: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "1", "--csv", "--state-dir", str(two_sweeps)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(rows[0]) == ["run", "values", "job_id", "nodes", "state", "failure_class",
                             "tgs", "mfu", "memory", "start", "end", "node_hours"]
    assert [r["run"] for r in rows] == [str(i + 1) for i in range(len(rows))]
    done = [r for r in rows if r["state"] == "passed"]
    assert done and all(r["values"].startswith("per_device_batch_size=") for r in done)
    assert all(float(r["tgs"]) > 0 and r["job_id"] and r["start"] <= r["end"]
               and float(r["node_hours"]) > 0 and r["nodes"].startswith("chi") for r in done)


def test_compare_shows_two_sweeps_side_by_side(two_sweeps: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "1", "2", "--state-dir", str(two_sweeps)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    table = {line.split("  ", 1)[0]: line for line in lines}
    for key in ("kind", "model", "nodes", "verdict", "best", "runs", "node-hours"):
        assert key in table, out
    assert table["kind"].split()[1:] == ["model-perf", "model-perf"]
    assert table["model"].split()[1:] == ["llama2-70b", "llama2-70b"]
    assert "TGS" in table["best"]
    # Per value: both sweeps' TGS, only where both ran (each ran 10; 6 at least by one).
    per_value = lines[lines.index("per value (TGS where both ran):") + 1:]
    assert per_value[0].split() == ["VALUE", "#1", "#2"]
    assert any(line.startswith("per_device_batch_size=10 ") for line in per_value), out


def test_compare_of_an_unknown_sweep_is_one_line(two_sweeps: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "1", "9", "--state-dir", str(two_sweeps)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
