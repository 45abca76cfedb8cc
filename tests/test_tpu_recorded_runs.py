"""Every real MaxText run recorded on the TPU v5e chip (tests/fixtures/tpu_v5e/) read as the
engine reads it: the steady TGS, the compiled-memory line, the out-of-memory at compile and
the run killed mid-compile. The figures are the fixtures' README table, computed there with an
independent script over the same raw lines (mean of steps 5-14)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sweepd.monitor.facts import FailureClass
from sweepd.monitor.reading import LogReading, read_log

RUNS = Path(__file__).parent / "fixtures" / "tpu_v5e"

# batch -> (steady TGS, mean of steps 5-14; compiled-memory line, GB)
PASSED = {4: (61617.2, 5.2), 8: (62020.9, 6.1), 12: (63557.1, 6.8), 16: (62003.7, 7.0),
          24: (62608.5, 8.8), 32: (60735.9, 10.8), 48: (61182.9, 14.7)}


def _read(tag: str, exit_code: int) -> LogReading:
    with gzip.open(RUNS / f"2026-12-06-{tag}.log.gz", "rt") as f:
        return read_log(f.read().splitlines(), exit_code=exit_code)


@pytest.mark.parametrize("batch", sorted(PASSED))
def test_a_recorded_pass_reads_its_steady_tgs_and_memory_line(batch: int) -> None:
    reading = _read(f"b{batch}", 0)
    tgs, memory = PASSED[batch]
    assert reading.failure.verdict.klass is None
    assert reading.last_step == 14
    assert reading.window == tuple(range(5, 15))       # steps 0-2 (and 3-4) never averaged in
    assert reading.tgs_mean == pytest.approx(tgs, abs=0.1)
    assert reading.compiled is not None and reading.compiled.total_gb == pytest.approx(memory)
    assert reading.memstats is not None and reading.memstats.limit_gb == pytest.approx(15.75)


def test_the_recorded_best_batch_is_12() -> None:
    measured = {b: _read(f"b{b}", 0).tgs_mean for b in PASSED}
    assert max(measured, key=lambda b: measured[b] or 0.0) == 12


def test_the_recorded_compile_oom_is_an_oom_with_its_sizes() -> None:
    reading = _read("b80", 1)
    assert reading.failure.verdict.klass is FailureClass.OOM
    assert reading.failure.required_gb == pytest.approx(17.57)
    assert reading.failure.available_gb == pytest.approx(15.75)
    assert reading.compiled is None and reading.last_step is None


def test_a_run_killed_while_compiling_is_no_pass_and_no_oom() -> None:
    reading = _read("b64", 124)
    assert reading.last_step is None
    assert reading.failure.verdict.klass not in (None, FailureClass.OOM)
