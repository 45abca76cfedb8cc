"""The two sweeps sweepd ran on the real TPU v5e chip (`scripts/tpu/run.sh sweepd`: the local
backend, real MaxText as the trainer; tests/fixtures/tpu_v5e/2026-12-06-sweep-*/, each job's
raw log, the report and the spec), held against what the replay of the every-batch-once runs
predicts (bench/tpu_recorded_sweep.py) and against those runs themselves: the replay is what
CI judges the search on, so it must be what the chip does."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from sweepd.monitor.facts import FailureClass
from sweepd.monitor.reading import read_log
from tests.golden_files import GOLDEN, check_golden
from tests.tpu_bench import bench
from tests.web_pages import card, check_page

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "tpu_v5e"
# Both ran under the seed's fixed prior, before measured_noise was on by default on one box:
# replayed under that rule (measured_noise: false), they run what the chip ran.
SWEEPS = {"2026-12-06-sweep-noise-floor-0.001": ({"noise_floor": 0.001,
                                                  "measured_noise": False}, 12),
          "2026-12-06-sweep-default": ({"measured_noise": False}, 8)}



def _report(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name / "report.json").read_text())
    return data


def _batches(name: str) -> list[int]:
    return [int(r["value"]) for r in sorted(_report(name)["rows"], key=lambda r: int(r["job"]))]


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_the_chip_sweep_ran_what_the_replay_predicts(name: str, tmp_path: Path) -> None:
    options, best = SWEEPS[name]
    assert _report(name)["verdict"]["best"] == best
    ran, chosen, _ = bench().sweep(options, tmp_path / "replay")
    assert (ran, chosen) == (_batches(name), best)
    # The replayed chip sweep's HTML page: its verdict's figure first, its curve, its runs.
    page = check_page(tmp_path / "replay" / "state")
    assert card(page)[0]["Figure"].startswith(f"per_device_batch_size={best} at ")


def test_measured_noise_decides_with_the_noise_the_chip_measures(tmp_path: Path) -> None:
    """The recorded default sweep chose 8 (2.4 % under 12) deciding at the 1 % prior while
    the chip's steps measured 0.05 %; `measured_noise` decides with the measure and finds
    12, the best of every batch once."""
    ran, chosen, caveat = bench().sweep({"measured_noise": True}, tmp_path / "measured")
    assert chosen == 12 and len(ran) <= len(_batches("2026-12-06-sweep-noise-floor-0.001")) + 1
    check_golden(GOLDEN / "tpu_chip_sweeps" / "measured_noise_caveat.txt", f"{caveat}\n")


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_each_chip_run_reads_within_the_run_to_run_noise_of_every_batch_once(name: str
                                                                              ) -> None:
    truth = {b: t for b, (t, _) in bench().recorded().items()}
    for row in sorted(_report(name)["rows"], key=lambda r: int(r["job"])):
        batch = int(row["value"])
        with gzip.open(FIXTURES / name / f"job{row['job']}.log.gz", "rt") as f:
            reading = read_log(f.read().splitlines())
        expected = truth[batch]
        if expected is None:   # 80: out of memory at compile, on both days
            assert reading.failure.verdict.klass is FailureClass.OOM
            assert reading.failure.required_gb == pytest.approx(17.57)
            continue
        assert reading.failure.verdict.klass is None
        assert reading.tgs_mean == pytest.approx(row["tgs"], rel=1e-6)
        # Another machine, another hour: the chip's runs agree to a few hundredths of a
        # percent (the largest gap: batch 4, 0.14 %).
        assert reading.tgs_mean == pytest.approx(expected, rel=0.002)
