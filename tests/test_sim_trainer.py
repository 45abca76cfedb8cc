"""The simulated trainer writes real maxtext-slurm logs, and the truth behind them."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from sweepd.sim.__main__ import main
from sweepd.sim.scenario import ScenarioError, load_scenario
from sweepd.sim.truth import true_max_batch, true_outcome, true_peak_batch
from tests.golden_files import GOLDEN, check_golden
from tests.support.sim_logs import log_shape

LOGS = GOLDEN / "sim_trainer"

NODES = "chi[2832,2863,2867-2868]"
STEP = re.compile(
    r"^(?:(\d+): )?completed step: (\d+), seconds: \d+\.\d{3}, TFLOP/s/device: \d+\.\d{3}, "
    r"MFU: \d+\.\d{2}%, Tokens/s/device: (\d+\.\d{3}), total_weights: \d+, loss: \d+\.\d{3}$")


def write_scenario(tmp_path: Path, **extra: object) -> Path:
    data: dict[str, object] = {
        "cluster": {"nodes": NODES, "time_scale": 0.0005, "noise": 0.01, "seed": 3},
        "models": {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400}},
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def train(tmp_path: Path, scenario: Path, *args: str, nodes: str = "chi2832",
          job_id: str = "12345", model: str = "llama2-70b") -> tuple[int, list[str]]:
    log = tmp_path / f"{job_id}.log"
    code = main(["train", "--scenario", str(scenario), "--model", model, "--job-id", job_id,
                 "--job-name", f"JAX-{model}", "--nodes", nodes, "--all-ranks", "--log",
                 str(log), "--state-dir", str(tmp_path / "state"), "--", *args])
    return code, log.read_text().splitlines()


def steps_of(lines: list[str], rank: str = "0") -> list[tuple[int, float]]:
    found = [STEP.match(line) for line in lines]
    return [(int(m[2]), float(m[3])) for m in found if m and m[1] == rank]


NODE_EXIT = re.compile(r"^(?:(\d+): )?NODE_EXIT host=(\S+) exit=(\d+)$", re.MULTILINE)


def test_healthy_two_node_log_has_exact_formats(tmp_path: Path) -> None:
    code, lines = train(tmp_path, write_scenario(tmp_path), "per_device_batch_size=10",
                        nodes="chi[2832,2863]")
    assert code == 0
    assert any(re.fullmatch(r"== Preflight END \(\d+s\) ==", line) for line in lines)
    # The lines around the steps (the header, the phases, pre-flight, MFU, Memstats, the
    # false positives sweepd must not take for faults, the last step, the job summary).
    check_golden(LOGS / "healthy_two_node.log", log_shape(lines))
    mem = lines.index("1: Memstats: After params initialized:")
    assert re.fullmatch(r"1: \tUsing \(GB\) 10\.2 / 178\.6 \(5\.74%\) on rocm:0", lines[mem + 1])
    for rank in ("0", "1"):
        assert [s for s, _ in steps_of(lines, rank)] == list(range(15))
    for false_positive in ("Failed call to cuInit: UNKNOWN ERROR (303)",
                           "NCCL WARN MSCCL++: Feature not enabled",
                           "WARNING: AMD GPU device(s) is/are in a low-power state"):
        assert f"0: {false_positive}" in lines
    assert re.fullmatch(r"  Wall:   0h \d+m \d+s", lines[-3])
    assert lines[-1] == "=" * 65


def test_steady_tgs_matches_truth_and_step_zero_is_slow(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, nodes={"chi2868": {"speed": 0.9}})
    code, lines = train(tmp_path, scenario, "per_device_batch_size=8", nodes="chi2868")
    truth = true_outcome(load_scenario(scenario), "llama2-70b", ["chi2868"],
                         {"per_device_batch_size": "8"}, {}, None)
    tgs = [t for _, t in steps_of(lines)]
    assert code == 0
    assert tgs[0] < 0.5 * truth.tgs
    assert statistics.mean(tgs[5:]) == pytest.approx(truth.tgs, rel=0.02)
    assert truth.tgs == pytest.approx(0.9 * true_outcome(
        load_scenario(scenario), "llama2-70b", ["chi2832"], {"per_device_batch_size": "8"}, {},
        None).tgs)


def test_oom_above_max_batch(tmp_path: Path) -> None:
    code, lines = train(tmp_path, write_scenario(tmp_path), "per_device_batch_size=20",
                        nodes="chi[2832,2863]")
    assert code == 1
    check_golden(LOGS / "oom_above_max_batch.log", log_shape(lines))
    oom = [i for i, line in enumerate(lines) if "RESOURCE_EXHAUSTED: Out of memory" in line]
    # Every rank runs the same program over its budget: each prints the OOM itself, so a
    # rank srun kills early cannot hide it (the log would read as a node crash).
    assert sorted(int(lines[i].split(":", 1)[0]) for i in oom) == [0, 1]
    assert not [line for line in lines if "NCCL WARN Timeout" in line]
    assert re.search(r"allocate \d+\.\d\dGiB\.$", lines[oom[0]])
    assert not steps_of(lines)
    assert "FAILED (exit 1)" in lines[-2] and "Training failed" in lines[-2]


@pytest.mark.parametrize(("fault", "signature", "exit_code"), [
    ({"kind": "hsa_error", "node": "chi2863"}, "1: :0:rocdevice.cpp: Aborting", 134),
    ({"kind": "ecc", "node": "chi2863"}, "== ECC check FAILED (exit=1, ", 1),
    ({"kind": "node_crash", "node": "chi2863"}, "1: NODE_EXIT host=chi2863 exit=1", 1),
    ({"kind": "coord_timeout"}, "1: DEADLINE_EXCEEDED: GetKeyValue() timed out", 1),
    ({"kind": "unknown_flag", "flag": "--xla_bogus"},
     "parse_flags_from_env.cc:226] Unknown flag: --xla_bogus", 134),
    ({"kind": "config_error"}, "0: !!! Unknown model: llama2-70b", 1),
    ({"kind": "oom", "node": "chi2863"}, "1: jaxlib.xla_extension.XlaRuntimeError: "
     "RESOURCE_EXHAUSTED", 1),
])
def test_fault_prints_its_signature(tmp_path: Path, fault: dict[str, object], signature: str,
                                   exit_code: int) -> None:
    code, lines = train(tmp_path, write_scenario(tmp_path, faults=[fault]),
                        nodes="chi[2832,2863]")
    assert code == exit_code
    assert any(line.startswith(signature) or signature in line for line in lines)
    assert f"FAILED (exit {exit_code})" in lines[-2]


def test_fault_times_counted_across_processes(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "config_error", "times": 1}])
    assert train(tmp_path, scenario, job_id="1")[0] == 1
    assert train(tmp_path, scenario, job_id="1")[0] == 1      # the same job keeps its claim
    assert train(tmp_path, scenario, job_id="2")[0] == 0


def test_commit_effect_fails_model(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, commits={"candidate": {"llama2-70b": {"fail":
                                                                             "config_error"}}})
    log = tmp_path / "c.log"
    code = main(["train", "--scenario", str(scenario), "--model", "70b", "--job-id", "9",
                 "--job-name", "JAX-llama2-70b", "--nodes", "chi2832", "--all-ranks", "--log",
                 str(log), "--state-dir", str(tmp_path), "--commit", "candidate"])
    assert code == 1
    # The config error's line where the trainer would have started (rank 0 only).
    check_golden(LOGS / "commit_fails_model.log", log_shape(log.read_text().splitlines()))


def test_profiler_step_eight_is_an_outlier(tmp_path: Path) -> None:
    code, lines = train(tmp_path, write_scenario(tmp_path), "profiler=xplane", "steps=12")
    tgs = dict(steps_of(lines))
    assert code == 0 and sorted(tgs) == list(range(12))
    steady = statistics.mean(tgs[s] for s in (2, 3, 4, 9, 10, 11))
    assert tgs[8] < 0.3 * steady
    assert all(tgs[s] < 0.95 * steady for s in (5, 6, 7))


def test_hang_then_sigterm_is_cancelled(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hang", "phase": "compile"}])
    log = tmp_path / "hang.log"
    exit_file = tmp_path / "hang.exit"
    proc = subprocess.Popen([sys.executable, "-m", "sweepd.sim", "train", "--scenario",
                             str(scenario), "--model", "llama2-70b", "--job-id", "7",
                             "--job-name", "JAX-llama2-70b", "--nodes", "chi[2832,2863]",
                             "--all-ranks", "--log", str(log), "--state-dir", str(tmp_path),
                             "--exit-file", str(exit_file)])
    try:
        _wait_for(lambda: "Memstats" in (log.read_text() if log.exists() else ""))
        proc.terminate()
        assert proc.wait(timeout=30) == 143
    finally:
        proc.kill()
        proc.wait()
    text = log.read_text()
    assert "completed step" not in text
    assert NODE_EXIT.findall(text) == [("0", "chi2832", "143"), ("1", "chi2863", "143")]
    assert "CANCELLED (scancel / SIGTERM)" in text.splitlines()[-2]
    assert exit_file.read_text().strip() == "143"


def _wait_for(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_slurm_mode_prints_own_rank_unprefixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hsa_error", "node": "chi2863"}])
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "chi[2832,2863]")
    code = main(["train", "--scenario", str(scenario), "--model", "llama2-70b", "--job-id",
                 "5", "--job-name", "JAX-llama2-70b", "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 134
    assert "completed step: 3" in out[-4]
    assert out[-3].startswith(":0:rocdevice.cpp") and out[-2] == ":0:rocdevice.cpp: Aborting"
    assert NODE_EXIT.findall(out[-1]) == [("", "chi2863", "134")]
    assert not any(line.startswith(("0: ", "== ")) for line in out)


def test_header_and_summary_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    main(["header", "--job-id", "1", "--job-name", "JAX-llama2-70b", "--model", "llama2-70b",
          "--nodes", "chi[2832,2863]", "--", "steps=1"])
    main(["summary", "--job-id", "1", "--job-name", "JAX-llama2-70b", "--model", "llama2-70b",
          "--nodes", "chi[2832,2863]", "--exit", "134", "--wall", "843", "--failure",
          "Training failed"])
    out = capsys.readouterr().out
    check_golden(LOGS / "header_and_summary.txt", out)
    assert out.splitlines()[-3] == "  Wall:   0h 14m 3s"   # --wall 843


def test_truth_peak_and_max_batch(tmp_path: Path) -> None:
    scenario = load_scenario(write_scenario(tmp_path))
    assert true_max_batch(scenario, "llama2-70b", ["chi2832"]) == 14
    assert true_peak_batch(scenario, "llama2-70b", ["chi2832"]) == 10
    tgs = [true_outcome(scenario, "llama2-70b", ["chi2832"], {"per_device_batch_size": str(b)},
                        {}, None).tgs for b in range(1, 15)]
    assert max(tgs) == tgs[9] == pytest.approx(1400)
    assert true_peak_batch(scenario, "llama2-70b", ["chi2832"], {"remat_policy": "full"}) >= 10
    assert true_max_batch(scenario, "llama2-70b", ["chi2832"], {"remat_policy": "full"}) > 14
    # Derived truth (no models entry) for a MoE model: fits some batch, plausible MFU.
    grok = true_outcome(scenario, "grok-1", scenario.cluster.node_list, {}, {}, None)
    assert grok.fits and 5 < grok.mfu < 60


def test_scenario_rejects_unknown_nodes_and_bad_fields(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"chi9999 not in cluster\.nodes"):
        load_scenario(write_scenario(tmp_path, links=[{"a": "chi2832", "b": "chi9999",
                                                       "factor": 0.9}]))
    with pytest.raises(ScenarioError, match="needs 'seconds'"):
        load_scenario(write_scenario(tmp_path, faults=[{"kind": "controller_down"}]))
    with pytest.raises(ScenarioError, match="unknown model"):
        load_scenario(write_scenario(tmp_path, models={"gpt-9": {"max_batch": 1,
                                                                 "peak_batch": 1,
                                                                 "peak_tgs": 1}}))


def test_default_scenario_loads() -> None:
    from sweepd.sim.scenario import DEFAULT_SCENARIO
    scenario = load_scenario(DEFAULT_SCENARIO)
    assert len(scenario.cluster.node_list) == 8


def test_a_per_job_config_runs_its_model_with_its_overrides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """submit.sh mode carries overrides a job name cannot hold in configs/<model>-oXXXXXX
    (clusters/slurm/carried.py): the simulated trainer reads it from the toolkit's frozen copy, as
    MaxText reads its config, instead of refusing the name as an unknown model; the command
    line still wins over it."""
    toolkit = tmp_path / "toolkit"
    (toolkit / "configs").mkdir(parents=True)
    (toolkit / "configs" / "llama2-70b-oabc123.gpu.yml").write_text(
        "steps: 7\nper_device_batch_size: 10\n")
    monkeypatch.setenv("MAXTEXT_SLURM_DIR", str(toolkit))
    scenario = write_scenario(tmp_path)
    code, lines = train(tmp_path, scenario, model="llama2-70b-oabc123")
    assert code == 0, [line for line in lines if "!!!" in line]
    assert sorted(s for s, _ in steps_of(lines)) == list(range(7))
    code, lines = train(tmp_path, scenario, "steps=5", model="llama2-70b-oabc123", job_id="2")
    assert code == 0 and sorted(s for s, _ in steps_of(lines)) == list(range(5))


def _rank(scenario: Path, state: Path, rank: int, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    monkeypatch.setenv("SLURM_PROCID", str(rank))
    monkeypatch.setenv("SLURM_JOB_NODELIST", "chi[2832,2863]")
    code = main(["train", "--scenario", str(scenario), "--model", "llama2-70b", "--job-id",
                 "5", "--job-name", "JAX-llama2-70b", "--state-dir", str(state), "--",
                 "per_device_batch_size=9"])
    return code, capsys.readouterr().out.splitlines()


def test_a_jobs_ranks_share_the_plan_its_first_rank_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hsa_error", "node": "chi2863"}])
    alone = _rank(scenario, tmp_path / "alone", 1, monkeypatch, capsys)   # planned itself
    assert alone[0] == 134
    state = tmp_path / "shared"
    _rank(scenario, state, 0, monkeypatch, capsys)   # plans, and leaves the plan
    good = scenario.read_text()
    scenario.write_text("cluster: [broken]\n")   # rank 1 no longer reads it: rank 0's plan
    assert _rank(scenario, state, 1, monkeypatch, capsys) == alone
    # Another job with the same id (another cluster's numbering, within minutes) whose
    # environment differs does not take this one's plan: it plans, here from the broken file.
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_latency_hiding_scheduler=false")
    with pytest.raises(SystemExit, match="invalid scenario"):
        _rank(scenario, state, 1, monkeypatch, capsys)
    monkeypatch.delenv("XLA_FLAGS")
    # A plan older than a job's ranks' start is an earlier job's (a cluster numbering its
    # jobs from 1 again): planned anew, here from the broken scenario.
    (plan,) = (state / "plans").glob("*.plan")
    os.utime(plan, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(SystemExit, match="invalid scenario"):
        _rank(scenario, state, 1, monkeypatch, capsys)
    scenario.write_text(good)
