"""A recorded scenario: the simulated cluster replays a measured table (`models.<m>.measured`,
docs/scenario.md) instead of its formula. Shipped: the 0.27 B model's curve on one TPU v5e
chip, every batch once (tests/fixtures/tpu_v5e/). The table's mechanics are tested on the
relations an earlier session's runs showed (tests/fixtures/scenarios/tpu-v5e-relations.yaml),
whose compiled-memory line read over the chip's memory at 56 and 64 and both passed."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.app import foreground
from sweepd.config import load_config
from sweepd.kinds.model_perf.rules import OPTIMUM
from sweepd.kinds.parse import load_spec_file
from sweepd.monitor.facts import CompiledMemoryFact, MemstatsFact, StepFact
from sweepd.monitor.parse import parse_line
from sweepd.sim.__main__ import main
from sweepd.sim.scenario import ScenarioError, load_scenario
from sweepd.sim.truth import true_max_batch, true_outcome, true_peak_batch
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.simrun import recorded, run
from tests.support.sim_logs import log_shape

EXAMPLES = Path(__file__).parent.parent / "examples"
MEASURED = EXAMPLES / "scenarios" / "tpu-v5e-maxtext-0.27b.yaml"
MEASURED_SPEC = EXAMPLES / "model-perf" / "tpu-v5e-replay.yaml"
SCENARIO = Path(__file__).parent / "fixtures" / "scenarios" / "tpu-v5e-relations.yaml"
SPEC = Path(__file__).parent / "fixtures" / "scenarios" / "tpu-v5e-relations-spec.yaml"
MODEL = "maxtext-0.27b"
NODE = "tpu-v5e-1"
LOGS = GOLDEN / "sim_replay"
TGS = re.compile(r"completed step: (\d+), seconds: ([0-9.]+), .*Tokens/s/device: ([0-9.]+)")


def fast(tmp_path: Path, source: Path = SCENARIO, **measured: Any) -> Path:
    raw = yaml.safe_load(source.read_text())
    raw["cluster"]["time_scale"] = 0.0001
    raw["models"][MODEL]["measured"].update(measured)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def train(tmp_path: Path, scenario: Path, batch: int, job_id: str = "7001"
          ) -> tuple[int, list[str]]:
    log = tmp_path / f"{job_id}.log"
    code = main(["train", "--scenario", str(scenario), "--model", MODEL, "--job-id", job_id,
                 "--job-name", f"JAX-{MODEL}", "--nodes", NODE, "--all-ranks", "--log",
                 str(log), "--state-dir", str(tmp_path / "state"), "--",
                 f"per_device_batch_size={batch}"])
    return code, log.read_text().splitlines()


def steps(lines: list[str]) -> dict[int, tuple[float, float]]:
    return {int(m[1]): (float(m[2]), float(m[3])) for line in lines if (m := TGS.search(line))}


def test_the_truth_reads_the_table() -> None:
    scenario = load_scenario(SCENARIO)
    assert true_peak_batch(scenario, MODEL, [NODE]) == 12
    assert true_max_batch(scenario, MODEL, [NODE]) == 64
    at64 = true_outcome(scenario, MODEL, [NODE], {"per_device_batch_size": "64"}, {}, None)
    assert at64.fits and at64.tgs == 64000 and at64.line_total_gb == 18.0
    at80 = true_outcome(scenario, MODEL, [NODE], {"per_device_batch_size": "96"}, {}, None)
    assert not at80.fits   # every batch from the OOM's up fails
    with pytest.raises(ValueError, match="per_device_batch_size=36 was not measured"):
        true_outcome(scenario, MODEL, [NODE], {"per_device_batch_size": "36"}, {}, None)


def test_a_pass_prints_its_recorded_line_over_the_chips_memory(tmp_path: Path) -> None:
    code, lines = train(tmp_path, fast(tmp_path), 64)
    assert code == 0
    # The recorded compiled-memory line (18.0 GB) and the chip's pool (15.75) as printed.
    check_golden(LOGS / "pass_at_64.log", log_shape(lines))
    by_step = steps(lines)
    assert sorted(by_step) == list(range(15))
    # Steps 0-2 are not step times: 0 and 1 as recorded (at least a steady step), 2 a
    # fraction of one (a very high tokens/s); sweepd's window (5-14) averages the run's TGS.
    steady = statistics.fmean(by_step[s][1] for s in range(5, 15))
    assert steady == pytest.approx(64000, rel=0.002)
    assert by_step[2][1] > 3 * steady
    assert by_step[0][0] == pytest.approx(2.11, abs=0.001) or by_step[0][0] > 2.0


def test_the_step_noise_is_what_the_table_says(tmp_path: Path) -> None:
    scenario = fast(tmp_path, step_noise=0.01, run_noise=0.0)
    _, lines = train(tmp_path, scenario, 12)
    tgs = [steps(lines)[s][1] for s in range(5, 15)]
    assert statistics.fmean(tgs) == pytest.approx(66000, rel=1e-4)
    assert 0.003 < statistics.stdev(tgs) / 66000 < 0.03


def test_an_oom_names_what_the_chip_said(tmp_path: Path) -> None:
    code, lines = train(tmp_path, fast(tmp_path), 80)
    assert code == 1
    check_golden(LOGS / "oom_at_80.log", log_shape(lines))   # the chip's 1.82GiB
    assert not any("Total memory size" in line for line in lines)   # it failed compiling


def test_the_tpu_format_is_asked_for(tmp_path: Path) -> None:
    scenario = fast(tmp_path, log_format="tpu")
    code, lines = train(tmp_path, scenario, 56)
    assert code == 0
    assert sorted(steps(lines)) == list(range(15))
    code, oom = train(tmp_path, scenario, 80, job_id="7002")
    assert code == 1
    # MaxText's TPU lines: max_utils' estimate, the TPU_0 pool, metric_logger's steps with
    # perplexity, and the HBM OOM naming the temporaries' need and the chip's memory.
    check_golden_cases(LOGS / "tpu_format.txt", {"pass at 56": log_shape(lines),
                                                 "OOM at 80": log_shape(oom)})


def test_an_unmeasured_batch_fails_with_one_line(tmp_path: Path) -> None:
    code, lines = train(tmp_path, fast(tmp_path), 36)
    assert code == 1
    assert len([line for line in lines if "ValueError" in line]) == 1
    check_golden(LOGS / "unmeasured_batch.log", log_shape(lines))


def test_the_default_lines_are_read_as_sweepd_reads_them(tmp_path: Path) -> None:
    """The replay's default format is the one sweepd's monitor reads today."""
    _, lines = train(tmp_path, fast(tmp_path), 64)
    facts = [parse_line(line) for line in lines]
    memory = [f for f in facts if isinstance(f, CompiledMemoryFact)]
    pool = [f for f in facts if isinstance(f, MemstatsFact)]
    assert [(f.total_gb, f.temp_gb) for f in memory] == [(18.0, 15.0)]
    assert [f.limit_gb for f in pool] == [15.75]
    window = [f.tgs for f in facts if isinstance(f, StepFact) and 5 <= f.step <= 14]
    assert statistics.fmean(window) == pytest.approx(64000, rel=0.002)


@pytest.mark.parametrize("bad, said", [
    ({"max_batch": 4}, "'measured' replaces max_batch"),
    ({"measured": {"oom": {"from_batch": 64}}}, "must be above every measured batch"),
    ({"measured": {"points": {}}}, "points"),
])
def test_a_bad_table_is_one_clear_line(tmp_path: Path, bad: dict[str, Any], said: str) -> None:
    raw = yaml.safe_load(SCENARIO.read_text())
    model = raw["models"][MODEL]
    for key, value in bad.items():
        if isinstance(value, dict) and isinstance(model.get(key), dict):
            model[key].update(value)
        else:
            model[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ScenarioError, match=said):
        load_scenario(path)


def test_every_shipped_scenario_loads() -> None:
    for path in sorted((EXAMPLES / "scenarios").glob("*.yaml")):
        load_scenario(path)


async def test_the_search_on_the_replayed_curve_finds_the_true_best(tmp_path: Path) -> None:
    """The example spec on the chip's curve names what every batch run once finds (12),
    and the runs it made are recorded; 56 and 64 (lines over the chip's memory) are never
    said not to fit."""
    scenario = load_scenario(SCENARIO)
    every_once = max(scenario.models[MODEL].measured.points.items(),  # type: ignore[union-attr]
                     key=lambda bp: bp[1].tgs)[0]
    assert every_once == true_peak_batch(scenario, MODEL, [NODE]) == 12
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "daemon.tick_s": 0.1, "cluster.gpu_memory_gib": 15.75,
                                "cluster.sim": {"scenario": str(fast(tmp_path))}})
    spec = load_spec_file(SPEC)
    code, lines = await run(config, spec.model_dump(mode="json"))
    text = "\n".join(lines)
    assert code == foreground.EXIT_VERDICT, text[-2000:]
    verdict, _, runs = await recorded(config)
    assert verdict is not None and verdict["best"] == every_once, verdict
    assert ("per_device_batch_size=12", "pass") in runs and len(runs) <= spec.max_runs
    assert (verdict["rule"], verdict["settled"], verdict["runs"]) == (OPTIMUM.id, True,
                                                                      len(runs))
    assert "predicts it does not fit" not in text, text


async def test_a_best_whose_line_reads_over_the_chips_memory_is_reached(tmp_path: Path
                                                                        ) -> None:
    """The chip's table with the curve still rising at 64, whose line read 18.0 GB on a
    15.75 GiB chip: taken as proof, the line ruled 56 and 64 out; as evidence, 56 runs,
    passes, calibrates it, and 64 is found (80, the OOM, bounds the search)."""
    rising = {b: {"tgs": 60000 + 80 * b, **({"memory_gb": p["memory_gb"]} if "memory_gb" in p
                                           else {})}
              for b, p in yaml.safe_load(SCENARIO.read_text())["models"][MODEL]["measured"]
              ["points"].items()}
    scenario = fast(tmp_path, points=rising)
    assert true_peak_batch(load_scenario(scenario), MODEL, [NODE]) == 64
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "daemon.tick_s": 0.1, "cluster.gpu_memory_gib": 15.75,
                                "cluster.sim": {"scenario": str(scenario)}})
    _, lines = await run(config, load_spec_file(SPEC).model_dump(mode="json"))
    verdict, _, runs = await recorded(config)
    assert verdict is not None and verdict["best"] == 64, "\n".join(lines)[-3000:]
    assert ("per_device_batch_size=56", "pass") in runs


async def test_the_example_replays_the_measured_chip_curve_and_finds_its_best(
        tmp_path: Path) -> None:
    """The shipped example: the curve measured every batch once on the chip (best 12, 8 and 16
    2.4 % below). Its spec sets the noise floor the chip allows (noise_floor: 0.001), with
    which the search names 12; at sweepd's default floor (1 %) it names 8 and says why."""
    scenario = load_scenario(MEASURED)
    assert true_peak_batch(scenario, MODEL, [NODE]) == 12
    assert true_max_batch(scenario, MODEL, [NODE]) == 48
    spec = load_spec_file(MEASURED_SPEC)
    said: dict[str, str] = {}
    for floor, best in ((spec.noise_floor, 12), (0.01, 8)):   # type: ignore[attr-defined]
        state = tmp_path / f"state-{floor}"
        config = load_config(None, {"daemon.state_dir": str(state), "daemon.tick_s": 0.1,
                                    "cluster.sim": {"scenario": str(fast(tmp_path, MEASURED))}})
        code, lines = await run(config, {**spec.model_dump(mode="json"), "noise_floor": floor})
        text = "\n".join(lines)
        assert code == foreground.EXIT_VERDICT, text[-2000:]
        verdict, _, runs = await recorded(config)
        assert verdict is not None and verdict["best"] == best, text[-2000:]
        assert len(runs) <= 8
        # At the default floor the runs' steps show far less noise than it: said.
        kinds = [c["kind"] for c in verdict["caveats"]]
        assert ("quiet" in kinds) is (best == 8), verdict["caveats"]
        said[f"noise_floor {floor}"] = verdict["caveat"] or "(none)"
    check_golden_cases(LOGS / "example_verdict_caveats.txt", said)
