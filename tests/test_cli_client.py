"""The CLI's client verbs, run through `sweepd.cli.main.main` against a real daemon API.

The server runs on the test's event loop; each CLI call (a blocking httpx client) runs in
a worker thread, as it would in its own process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sweepd.cli.main import main
from sweepd.cli.output import format_table
from sweepd.core.states import RunState, SweepState
from sweepd.store.rows import RunParams
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.support.service import GOOD_YAML, NODES, SPEC, Daemon, serve_service, write_spec  # noqa: F401


async def test_submit_list_show(daemon: Daemon, tmp_path: Path) -> None:
    code, out, err = await daemon.run("submit", write_spec(tmp_path, GOOD_YAML))
    assert code == 0 and out == "1\n"
    assert "sweepd watch 1" in err
    code, out, _ = await daemon.run("submit", write_spec(tmp_path, json.dumps(SPEC), "s.json"),
                                    "--json")
    assert code == 0 and json.loads(out)["id"] == 2
    code, out, _ = await daemon.run("list")
    header, second, first = out.splitlines()   # newest first
    assert header.split() == ["ID", "STATE", "KIND", "RUNS", "JOBS", "ELAPSED", "ETA", "USER",
                              "UPDATED", "NAME"]
    assert first.split()[:4] == ["1", "queued", "model-perf", "0/≤12"] and first.endswith("first")
    assert second.startswith("2 ")
    assert header.index("NAME") == first.index("first")  # aligned
    code, out, _ = await daemon.run("list", "--json")
    listed = json.loads(out)
    assert code == 0 and [s["id"] for s in listed] == [2, 1] and listed[1]["name"] == "first"
    code, out, _ = await daemon.run("show", "1")
    assert code == 0
    assert "sweep 1: first" in out and "state: queued" in out and NODES in out


async def test_submit_bad_spec_exits_2_without_daemon(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_spec(tmp_path, f"kind: model-perf\nmodel: llama2-70b\nnodes: {NODES!r}\n"
                               "max_runs: 0\n")
    code = main(["submit", bad, "--socket", str(tmp_path / "absent.sock")])
    _, err = capsys.readouterr()
    assert code == 2
    said = {"max_runs 0 (said once)": err}
    broken = write_spec(tmp_path, "kind: [", "broken.yaml")
    code = main(["submit", broken, "--socket", str(tmp_path / "absent.sock")])
    assert code == 2
    said["not YAML (the file named)"] = capsys.readouterr().err
    code = main(["submit", str(tmp_path / "missing.yaml"), "--socket", "x.sock"])
    assert code == 2
    said["no such file"] = capsys.readouterr().err
    check_golden_cases(GOLDEN / "cli" / "submit_refusals.txt",
                       {k: scrubbed(v, tmp=tmp_path) for k, v in said.items()})


async def test_daemon_not_running_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "nobody.sock"
    monkeypatch.setenv("SWEEPD_SOCKET", str(sock))
    assert main(["list"]) == 1
    err = capsys.readouterr().err
    check_golden(GOLDEN / "cli" / "not_running.txt", scrubbed(err, tmp=tmp_path))


async def test_env_socket_is_the_default(daemon: Daemon, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setenv("SWEEPD_SOCKET", str(daemon.socket))
    code = await asyncio.to_thread(main, ["list"])
    assert code == 0 and daemon.capsys.readouterr().out == "no sweeps\n"


async def test_unknown_id_and_refused_operations_exit_2(daemon: Daemon) -> None:
    said: dict[str, str] = {}
    code, _, said["show of an unknown id"] = await daemon.run("show", "99")
    assert code == 2
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    code, _, said["resume of a queued sweep"] = await daemon.run("resume", str(sweep_id))
    assert code == 2
    code, said["abort"], _ = await daemon.run("abort", str(sweep_id))
    assert code == 0
    code, _, said["cancel of an aborted sweep"] = await daemon.run("cancel", str(sweep_id))
    assert code == 2
    check_golden_cases(GOLDEN / "cli" / "refused_operations.txt", said)


async def test_resume_with_exclusions(daemon: Daemon) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started")
    await daemon.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop")
    code, out, _ = await daemon.run("resume", str(sweep_id), "--exclude", "chi2867",
                                    "chi[2870,2872]", "--json")
    assert code == 0 and json.loads(out)["state"] == "running"
    excluded = [e.node for e in await daemon.store.exclusions.of_sweep(sweep_id)]
    assert excluded == ["chi2867", "chi2870", "chi2872"]
    await daemon.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop")
    code, _, err = await daemon.run("resume", str(sweep_id), "--readmit", "chi2880")
    assert code == 2
    check_golden(GOLDEN / "cli" / "readmit_refused.txt", err)


async def test_report_and_explain(daemon: Daemon) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    code, out, _ = await daemon.run("report", str(sweep_id))
    assert code == 0 and out.startswith(f"# Sweep {sweep_id}: ") and "- State: queued" in out
    code, out, _ = await daemon.run("report", str(sweep_id), "--json")
    assert code == 0 and json.loads(out)["sweep"]["spec"]["model"] == "llama2-70b"
    code, out, _ = await daemon.run("explain", str(sweep_id))
    assert code == 0 and "sweep submitted" in out
    code, out, _ = await daemon.run("explain", str(sweep_id), "--json")
    assert json.loads(out)["events"][0]["reason"] == "sweep submitted"


@pytest.mark.parametrize(("end", "code"), [(SweepState.DONE, 0),
                                           (SweepState.AWAITING_DECISION, 3),
                                           (SweepState.FAILED, 4)])
async def test_watch_exit_code_follows_the_end_state(daemon: Daemon, end: SweepState,
                                                     code: int) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started",
                                               progress="a")
    await daemon.store.sweeps.transition(sweep_id, end, "the end", progress="b")
    got, out, _ = await daemon.run("watch", str(sweep_id))
    assert got == code
    a, b, last = out.splitlines()
    assert (a, b) == ("a", "b")   # no job moved: no progress line between them
    # No job ever: nothing claims one, and the elapsed time names its base.
    expect = "no run ran" if end != SweepState.AWAITING_DECISION else "run 0 of ≤ 12"
    assert last.startswith(f"sweep {sweep_id}: {end} (the end) · {expect} · ")
    assert last.endswith(" elapsed (wall clock)")


async def test_watch_prints_lines_as_they_land(daemon: Daemon) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started",
                                               progress="batch 1 submitted")
    watch = asyncio.create_task(daemon.run("watch", str(sweep_id), "--json"))
    # Wait until the watcher is following (its stream is open) before the sweep moves on.
    for _ in range(200):
        if "batch 1 submitted" in daemon.capsys.readouterr().out or watch.done():
            break
        await asyncio.sleep(0.02)
    assert not watch.done()
    await daemon.service.abort(sweep_id)
    code, _, _ = await watch
    assert code == 4


def test_format_table_aligns_columns() -> None:
    rows: list[dict[str, Any]] = [{"id": 1, "tgs": 1234.5678, "name": "a"},
                                  {"id": 10, "tgs": None, "name": "bb"}]
    table = format_table(rows, [("id", "ID"), ("tgs", "TGS"), ("name", "NAME")])
    assert table.splitlines() == ["ID  TGS    NAME",
                                  "1   1,235  a",     # TGS to the token
                                  "10  -      bb"]


async def test_report_apply_writes_one_line_of_the_model_config(daemon: Daemon,
                                                                tmp_path: Path) -> None:
    sweep_id = int((await daemon.service.submit(SPEC))["id"])
    config = tmp_path / "llama2-70b.gpu.yml"
    config.write_text("model_name: llama2-70b\nper_device_batch_size: 4  # tuned 2025\n"
                      "steps: 15\n")
    code, _, err = await daemon.run("report", str(sweep_id), "--apply", str(config))
    assert code == 2 and "no optimum" in err  # nothing to apply yet
    await daemon.store.sweeps.transition(sweep_id, SweepState.RUNNING, "test")
    await daemon.store.sweeps.transition(
        sweep_id, SweepState.DONE, "test",
        verdict={"parameter": "per_device_batch_size", "best": 12, "tgs": 1400.0})
    other = tmp_path / "grok-1.gpu.yml"
    other.write_text("per_device_batch_size: 2\n")
    code, _, err = await daemon.run("report", str(sweep_id), "--apply", str(other))
    assert code == 2 and "not llama2-70b's config" in err
    assert other.read_text() == "per_device_batch_size: 2\n"   # another model's file untouched
    code, out, _ = await daemon.run("report", str(sweep_id), "--apply", str(config))
    assert code == 0 and "per_device_batch_size: 12" in out
    # One line changed, its comment and the other lines kept.
    check_golden(GOLDEN / "cli" / "report_apply_one_line.gpu.yml", config.read_text())


def test_apply_appends_a_missing_key_and_refuses_env_variables(tmp_path: Path) -> None:
    from sweepd.kinds.model_perf.hooks import ApplyError, apply_to_config

    config = tmp_path / "m.gpu.yml"
    config.write_text("steps: 15")
    apply_to_config(config, "remat_policy", "full")
    assert config.read_text() == "steps: 15\nremat_policy: full\n"
    with pytest.raises(ApplyError, match=r"\.env\.sh"):
        apply_to_config(config, "_env_XLA_PYTHON_CLIENT_MEM_FRACTION", ".93")
    with pytest.raises(ApplyError, match="cannot read"):
        apply_to_config(tmp_path / "missing.yml", "steps", 3)


async def test_show_names_a_jobs_run_by_its_number_in_the_sweep(daemon: Daemon) -> None:
    first = int((await daemon.service.submit(SPEC))["id"])
    for b in (4, 8):   # the first sweep's runs take the store's run ids 1 and 2
        await daemon.store.runs.add(first, f"b={b}",
                                        RunParams(overrides={"per_device_batch_size": b}), NODES,
                                        "test")
    second = int((await daemon.service.submit(SPEC))["id"])
    run = await daemon.store.runs.add(second, "b=16",
                                          RunParams(overrides={"per_device_batch_size": 16}), NODES,
                                          "test")
    await daemon.store.jobs.create(run, "tok", "job-name", NODES)
    assert run.id == 3 and run.seq == 1
    code, out, _ = await daemon.run("show", str(second))
    jobs = out.split("\njobs:\n")[1].splitlines()
    assert code == 0 and jobs[0].split()[:3] == ["JOB", "RUN", "#"]
    assert jobs[1].split()[1] == "1"   # run #1 of this sweep, not the store's run 3


async def test_show_prints_the_verdict_and_runs_for_a_person(daemon: Daemon) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    run = await daemon.store.runs.add(sid, "b=12",
                                          RunParams(overrides={"per_device_batch_size": 12}), NODES,
                                          "test")
    await daemon.store.runs.transition(run.id, RunState.ACTIVE, "submitting")
    await daemon.store.runs.transition(run.id, RunState.PASSED, "ran", outcome="pass",
                                           tgs=2036.4567, mfu=41.0)
    await daemon.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await daemon.store.sweeps.transition(
        sid, SweepState.DONE, "optimum", verdict={"best": 12, "tgs": 2036.4567,
                                                  "faults": [{"kind": "node"}]})
    code, out, _ = await daemon.run("show", str(sid))
    assert code == 0
    assert "    best: 12\n    tgs: 2,036\n" in out and "{" not in out
    # The verdict block a person reads (the progress line above it holds wall-clock time).
    verdict = out.split("  verdict:\n")[1].split("\nruns:")[0]
    check_golden(GOLDEN / "cli" / "show_done_verdict.txt", verdict)
    runs = out.split("\nruns:\n")[1].splitlines()
    assert runs[1].split()[4:6] == ["2,036", "41.0"]   # not "41" beside "41.1"


async def test_global_flags_before_or_after_the_verb(daemon: Daemon, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, GOOD_YAML)
    code, out, err = await daemon.run("--json", "submit", spec)
    assert code == 0 and json.loads(out)["id"] == 1, err
    for argv in (["--json", "list"], ["list", "--json"]):
        code, out, _ = await daemon.run(*argv)
        assert code == 0 and [s["id"] for s in json.loads(out)] == [1]
    code, out, _ = await daemon.run("--json", "show", "99")
    assert code == 2 and json.loads(out)["error"] == "sweep 99 not found"


async def test_cancel_says_what_it_cancelled(daemon: Daemon) -> None:
    waiting = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(waiting, SweepState.RUNNING, "started")
    await daemon.store.sweeps.transition(waiting, SweepState.AWAITING_DECISION, "stop")
    code, out, _ = await daemon.run("cancel", str(waiting))
    assert code == 0
    said = {"no job running": out}
    busy = int((await daemon.service.submit(SPEC))["id"])
    run = await daemon.store.runs.add(busy, "b=1",
                                          RunParams(overrides={"per_device_batch_size": 1}), NODES,
                                          "t")
    await daemon.store.jobs.create(run, "tok", "name", NODES)   # submitting: no scheduler id
    code, said["a job submitting"], _ = await daemon.run("cancel", str(busy))
    assert code == 0
    check_golden_cases(GOLDEN / "cli" / "cancel.txt", said)


def test_yaml_and_scenario_errors_one_line_per_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = write_spec(tmp_path, "kind: [\n", "broken.yaml")
    assert main(["submit", broken, "--socket", str(tmp_path / "absent.sock")]) == 2
    err = capsys.readouterr().err
    assert "\\n" not in err and len(err.splitlines()) == 3
    said = {"broken YAML": scrubbed(err, tmp=tmp_path)}
    scenario = tmp_path / "bad-scenario.yaml"
    scenario.write_text("cluster:\n  nodes: chi[1-4]\n  bogus: 3\nfaults:\n  - kind: nope\n")
    spec = write_spec(tmp_path, GOOD_YAML)
    code = main(["run", spec, "--scenario", str(scenario), "--state-dir", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "http" not in err and "pydantic" not in err
    lines = err.splitlines()
    assert len(lines) == 3
    said["a scenario's two problems"] = scrubbed(err, tmp=tmp_path)
    check_golden_cases(GOLDEN / "cli" / "one_line_per_problem.txt", said)
