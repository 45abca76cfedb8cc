"""A trainer that cannot start (issue 47): an import error, a missing script. The same at
every value, so the sweep stops after its first job (`environment.stop`), the failing line
quoted in the stop (its reason, `show`, `explain`, the Telegram message), and `sweepd run`
exits 3; never retried, never a model-perf result to bisect toward. What can be transient
(a hang, an unrecognised exit) is still retried, and a `kill -9` is named, on the local
backend over the fake trainer and on the simulated cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.config import Config, load_config
from sweepd.reports.report import explain_lines
from sweepd.store.rows import Job
from tests.golden_files import GOLDEN, check_golden
from tests.local_trainer import local_config_text, starts, write_trainer
from tests.simrun import open_store, perf_spec, recorded, run, sim_config, write_scenario

IMPORT_LINE = "ModuleNotFoundError: No module named 'jax'"
KILL9 = "killed by signal 9 (SIGKILL): the host's out-of-memory killer or a person"
STOPPED = 3   # foreground.EXIT_AWAITING_DECISION, README "exit with"


def _config(tmp_path: Path, command: str | None = None, **env: str) -> tuple[Path, Config]:
    """The local backend over the fake trainer (or `command`), with the default retries."""
    trainer = write_trainer(tmp_path)
    text = local_config_text(tmp_path, trainer, {"FAKE_STARTS": str(tmp_path / "starts"),
                                                 **env})
    if command is not None:
        text = text.replace(f"{sys.executable} {trainer}", command)
    path = tmp_path / "sweepd.toml"
    path.write_text(text)
    return path, load_config(path)


def _spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "model-perf", "model": "tiny-llama", "name": "tiny", **extra}


async def _jobs(config: Config) -> list[Job]:
    store = await open_store(config)
    try:
        return await store.jobs.of_sweep(1)
    finally:
        await store.close()


async def _stop_facts(config: Config) -> tuple[str | None, list[str], str]:
    """The stopped sweep's reason (what `show` prints), its `explain`, and the stop
    message (the Telegram one, a progress event)."""
    store = await open_store(config)
    try:
        sweep = await store.sweeps.get(1)
        events = await store.events.of_sweep(1)
        explained = explain_lines(events, {r.id: r.seq for r in await store.runs.of_sweep(1)})
        stop = next(e.reason for e in events if e.kind == "progress" and "STOP]" in e.reason)
    finally:
        await store.close()
    return sweep.reason, explained, stop


async def test_an_import_error_stops_the_sweep_after_its_first_job(tmp_path: Path) -> None:
    _, config = _config(tmp_path, FAKE_MODE="import")
    code, lines = await run(config, _spec())
    _, rules, runs = await recorded(config)
    assert code == STOPPED, lines
    assert len(starts(tmp_path / "starts")) == 1
    assert "environment.stop" in rules
    assert not {"python.retry", "retries.max", "unknown.retry_bounded"} & set(rules), rules
    # No result for the search to read (nothing "failed without an allocation size").
    assert [outcome for _, outcome in runs] == [None], runs
    reason, explained, stop = await _stop_facts(config)
    assert reason is not None and IMPORT_LINE in reason
    assert any("[environment.stop]" in line and IMPORT_LINE in line for line in explained)
    assert IMPORT_LINE in stop


# Trainers broken in a way no value changes, each with the rule that stops it and the line
# it quotes: a syntax error (Python prints no traceback for the script it runs), libtpu's
# unknown flag, MaxText's refusal of an override its config does not define.
BROKEN = {
    "syntax": ("def broken(:\n", "environment.stop", "SyntaxError: "),
    "flag": ("print(\"ERROR: Unknown command line flag 'xla_tpu_foo'\", flush=True)\n"
             "raise SystemExit(1)\n", "config.stop",
             "ERROR: Unknown command line flag 'xla_tpu_foo'"),
    "override": ("print(\"ValueError: 'no_such_key' not in 'steps', 'dataset_type'\", "
                 "flush=True)\nraise SystemExit(1)\n", "config.stop",
                 "ValueError: 'no_such_key' not in"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
async def test_a_trainer_broken_alike_at_every_value_stops_after_one_job(
        tmp_path: Path, broken: str) -> None:
    source, rule, line = BROKEN[broken]
    script = tmp_path / "broken_train.py"
    script.write_text(source)
    _, config = _config(tmp_path, command=f"{sys.executable} {script}")
    code, _ = await run(config, _spec())
    _, rules, runs = await recorded(config)
    assert code == STOPPED and rule in rules, rules
    assert [outcome for _, outcome in runs] == [None] and len(await _jobs(config)) == 1
    reason, _, stop = await _stop_facts(config)
    assert reason is not None and line in reason and line in stop


def test_a_missing_script_stops_sweepd_run_with_exit_3(tmp_path: Path) -> None:
    """`python3 /nope/train.py`: Python's own line, no traceback; through the CLI, then
    `explain` on the state directory."""
    config, _ = _config(tmp_path, command=f"{sys.executable} {tmp_path / 'nope' / 'train.py'}")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec()))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}

    def sweepd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                              text=True, timeout=300, env=env)

    done = sweepd("run", "--config", str(config), "--state-dir", str(tmp_path / "state"),
                  str(spec))
    assert done.returncode == STOPPED, done.stdout + done.stderr
    line = f"can't open file '{tmp_path / 'nope' / 'train.py'}'"
    assert line in done.stdout
    explained = sweepd("explain", "1", "--state-dir", str(tmp_path / "state"))
    assert explained.returncode == 0, explained.stderr
    assert "[environment.stop]" in explained.stdout and line in explained.stdout
    db_jobs = list((tmp_path / "state" / "local" / "jobs").glob("*.json"))
    assert len(db_jobs) == 1   # one job, never retried


async def test_a_kill_9_is_named_and_retried_as_before(tmp_path: Path) -> None:
    _, config = _config(tmp_path, FAKE_MODE="kill9")
    code, _ = await run(config, _spec(values=[2]))
    _, rules, _ = await recorded(config)
    assert code != STOPPED and "host_oom.retry" in rules, rules
    assert "unknown.retry_bounded" not in rules
    assert len(starts(tmp_path / "starts")) == 3   # max_retries 2: as any transient
    jobs = await _jobs(config)
    assert {(j.failure_class, j.failure_detail) for j in jobs} == {("host_oom", KILL9)}
    # The line that says so: the scheduler's (`exit code 137`: the local backend records the
    # signal as a shell would), or the summary's (`exit 137`, `killed by signal 9`).
    assert all(j.failure_line and ("137" in j.failure_line or "signal 9" in j.failure_line)
               for j in jobs), [j.failure_line for j in jobs]


async def test_an_unrecognised_exit_is_still_retried(tmp_path: Path) -> None:
    _, config = _config(tmp_path, FAKE_MODE="crash")
    await run(config, _spec(values=[2]))
    _, rules, _ = await recorded(config)
    assert rules.count("unknown.retry_bounded") >= 2 and "environment.stop" not in rules
    assert len(starts(tmp_path / "starts")) == 3


async def test_an_environment_fault_on_the_simulated_cluster_stops_at_once(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "environment"}])
    config = sim_config(tmp_path, scenario)
    code, _ = await run(config, perf_spec())
    _, rules, runs = await recorded(config)
    assert code == STOPPED
    assert "environment.stop" in rules and [o for _, o in runs] == [None], (rules, runs)
    jobs = await _jobs(config)
    assert len(jobs) == 1 and jobs[0].failure_class == "environment"
    reason, explained, stop = await _stop_facts(config)
    assert reason is not None and IMPORT_LINE in reason and IMPORT_LINE in stop
    assert any("[environment.stop]" in line for line in explained)
    # The environment is no node's fault: the stop names none (and tried no recovery).
    assert jobs[0].failure_node is None
    check_golden(GOLDEN / "environment_failures" / "stop_failing_nodes_line.txt",
                 next(line for line in stop.splitlines() if line.startswith("Failing")) + "\n")


async def test_an_oom_on_the_simulated_cluster_is_still_the_values_result(
        tmp_path: Path) -> None:
    """The rule does not catch an OOM: it is recorded, and the search goes on."""
    scenario = write_scenario(tmp_path)
    config = sim_config(tmp_path, scenario)
    code, _ = await run(config, perf_spec(values=[4, 64]))
    _, rules, runs = await recorded(config)
    assert code == 0 and "oom.never_retry" in rules and "environment.stop" not in rules
    assert sorted(o or "" for _, o in runs) == ["oom", "pass"]
