"""The model perf search and its verdict on recorded real curves (bench/recorded_curves.py): the
0.27 B model's raw chip logs (tests/fixtures/tpu_v5e/) and the curves issue 48 describes,
reconstructed from its figures (tests/fixtures/curves/, marked as reconstructions). Every
statement a verdict makes about a value it did not run must hold on the recorded truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.kinds.model_perf.edges import ungiven_beside_best
from sweepd.kinds.model_perf.search import Outcome, Probe, SearchSpace, why_not_run
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from tests.support.recorded_curves import harness


def _probes(curve: object, ran: list[int]) -> list[Probe]:
    """The runs as the kind reads them: TGS, the compiled-memory line (3.0 GB of it fixed),
    an OOM at compile without a line."""
    out = []
    for b in ran:
        run = curve.runs[b][0]  # type: ignore[attr-defined]
        if run.tgs is None:
            out.append(Probe(b, Outcome.OOM, None, alloc_gb=1.8))
        else:
            out.append(Probe(b, Outcome.OK, run.tgs, temp_gb=run.memory_gb - 3.0, fixed_gb=3.0,
                             limit_gb=15.75))
    return out


def _space(values: tuple[int, ...]) -> SearchSpace:
    return SearchSpace(values, None, True, work_grows=True, device_gb=15.75)


@pytest.fixture(scope="module")
def curves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    found = harness().curves(tmp_path_factory.mktemp("logs"))
    return {c.name.split()[0]: c for c in found}


def test_the_reconstructions_hold_the_issues_figures(curves: dict[str, object]) -> None:
    two, three = curves["curve2"], curves["curve3"]
    assert two.best == 28 and 20 in two.values  # type: ignore[attr-defined]
    assert two.truth(28) / two.truth(24) - 1 == pytest.approx(0.0047, abs=0.0003)  # type: ignore[attr-defined]
    assert three.best == 32 and len(three.values) == 7  # type: ignore[attr-defined]
    for side in (24, 40):
        assert three.truth(32) / three.truth(side) - 1 == pytest.approx(0.018, abs=0.0005)  # type: ignore[attr-defined]


def test_a_value_settled_by_the_secants_is_an_estimate_not_a_bound(
        curves: dict[str, object]) -> None:
    """Before: the seed's runs on the chip's curve said "12 (the TGS trend there allows at
    most +0.5 % over the best)" and "24 (... at most -2.4 %)": truly +2.48 % and +0.95 % over
    the 8 it chose; on curve 2, "28 (... at most -0.8 %)", truly +0.47 %, the best of all."""
    chip, two = curves["0.27b"], curves["curve2"]
    for curve, ran in ((chip, [16, 48, 32, 80, 8, 4]), (two, [24, 40, 32, 16, 20, 8, 48])):
        said = why_not_run(_space(curve.values), _probes(curve, ran), curve.values)  # type: ignore[attr-defined]
        for value, why in said.items():
            if why is not None and "at most" in why:
                # A bound that holds on any curve (step time), never the secants'.
                assert "a step never takes less time" in why, (value, why)
        assert "an estimate, not a run" in str(said[12 if curve is chip else 28])


def test_batches_not_given_are_read_between_the_values_given() -> None:
    """Before: a best of 24 with 16 and 32 run and 20 and 28 given, never run, read "batches
    17-23 and 25-31 ... were not among the values given"."""
    values = [4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64]
    spec = parse_spec({"kind": "model-perf", "model": "maxtext-0.27b", "nodes": "tpu-v5e-1",
                       "values": values})
    assert isinstance(spec, ModelPerfSpec)
    seen = [Probe(16, Outcome.OK, 61800.0), Probe(24, Outcome.OK, 62400.0),
            Probe(32, Outcome.OK, 61750.0)]
    said = ungiven_beside_best(spec, _space(tuple(values)), seen)
    assert said is not None and "batches 21-23 and 25-27," in said


def test_no_verdict_on_a_recorded_curve_states_what_its_truth_contradicts(
        tmp_path: Path, curves: dict[str, object]) -> None:
    """Replayed through the local backend at the spec's defaults: each curve's verdict
    checked against its recorded truth (bench/recorded_curves.py `false_statements`)."""
    h = harness()
    for i, curve in enumerate(curves.values()):
        for j, options in enumerate(({}, {"measured_noise": True})):
            result = h.sweep(curve, options, tmp_path / f"{i}-{j}")
            assert result.chosen is not None
            assert h.false_statements(curve, result) == [], (curve.name, result.caveat)  # type: ignore[attr-defined]


def test_measured_noise_finds_the_best_of_every_recorded_curve(
        tmp_path: Path, curves: dict[str, object]) -> None:
    """At the 1 % prior the chip's curve chose 8 (-2.4 %) and curve 2 24 (-0.45 %)."""
    h = harness()
    for i, curve in enumerate(curves.values()):
        result = h.sweep(curve, {"measured_noise": True}, tmp_path / str(i))
        assert result.chosen == curve.best, (curve.name, result.ran)  # type: ignore[attr-defined]
