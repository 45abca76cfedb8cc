"""The CLI's views around a sweep against a real daemon API: progress in list/show/watch,
list filters and the submitter, validate and submit --dry-run, models, status, logs,
--state-dir, shell completion, --version and --json errors.

The restart test runs `sweepd serve` and `sweepd watch` as real processes."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from rich.console import Console

from sweepd.app.progress import sweep_progress
from sweepd.cli.logs import log_text
from sweepd.cli.main import main
from sweepd.core.budgets import slurm_seconds
from sweepd.core.states import JobState, RunState, SweepState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.daemon_proc import Daemon as DaemonProc
from tests.daemon_proc import write_config
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import perf_spec, write_scenario
from tests.support.service import GOOD_YAML, NODES, SPEC, Daemon, write_spec

ME = pwd.getpwuid(os.getuid()).pw_name


async def _finished_job(store: Store, sweep_id: int, seq_label: str, took: float,
                        log: Path | None = None, failure_line: str | None = None) -> None:
    """A run with one job that ran `took` cluster seconds and ended."""
    run = await store.runs.add(sweep_id, seq_label,
                                   RunParams(overrides={"per_device_batch_size": 1}), NODES, "t")
    job = await store.jobs.create(run, f"tok-{seq_label}", "name", NODES)
    await store.jobs.transition(job.id, JobState.QUEUED, "q", backend_id=f"b{job.id}",
                                    submitted_at=1000.0, log_path=str(log) if log else None)
    await store.jobs.transition(job.id, JobState.RUNNING, "r")
    await store.jobs.transition(job.id, JobState.FAILED if failure_line else JobState.DONE,
                                    "ended", ended_at=1000.0 + took, failure_line=failure_line)
    await store.runs.transition(run.id, RunState.ACTIVE, "a")
    await store.runs.transition(run.id, RunState.PASSED, "p", outcome="pass", tgs=1000.0)


# -- progress ----------------------------------------------------------------------------

async def test_progress_in_list_show_and_the_sweep_json(daemon: Daemon, tmp_path: Path
                                                        ) -> None:
    code, out, _ = await daemon.run("submit", write_spec(tmp_path, GOOD_YAML))
    sid = int(out)
    await daemon.store.sweeps.transition(sid, SweepState.RUNNING, "started")
    await _finished_job(daemon.store, sid, "b=1", 600)
    run = await daemon.store.runs.add(sid, "b=2",
                                          RunParams(overrides={"per_device_batch_size": 2}), NODES,
                                          "t")
    await daemon.store.jobs.create(run, "tok-2", "name", NODES)   # submitting: queued now
    code, out, _ = await daemon.run("show", str(sid), "--json")
    shown = json.loads(out)
    assert shown["run_list"][1]["params"]["overrides"] == {"per_device_batch_size": 2}
    p = shown["progress"]
    assert (p["runs_started"], p["runs_done"], p["runs_most"]) == (2, 1, 12)
    assert (p["jobs_queued"], p["jobs_running"], p["jobs_finished"]) == (1, 0, 1)
    # 11 runs left at most, one job at a time, 600 s each: a guess from one job.
    assert p["eta_s"] == 600 * 11 and p["eta_guess"] is True
    # Elapsed on the ETA's base (cluster time: the finished job's 600 s), and it says so.
    assert (p["elapsed_s"], p["time_base"]) == (600, "cluster time")
    check_golden(GOLDEN / "cli" / "progress_queued.txt", p["line"] + "\n")
    code, out, _ = await daemon.run("show", str(sid))
    assert f"  progress: {p['line'].split(' · ')[0]}" in out and "ETA basis: 1 finished" in out
    code, out, _ = await daemon.run("list")
    assert code == 0
    row = out.splitlines()[1].split()
    assert row[:7] == [str(sid), "running", "model-perf", "1/≤12", "1q", "10m", "≤1h50m?"]
    assert row[7] == ME


async def test_eta_counts_runs_that_run_together(store: Store) -> None:
    sid = await store.sweeps.create("node-perf", "n", {"nodes": NODES})
    await store.sweeps.transition(sid, SweepState.RUNNING, "started")
    for node in range(8):   # the first wave: 8 one-node jobs at once, 300 s each
        await _finished_job(store, sid, f"node={node}", 300)
    p = sweep_progress(await store.sweeps.get(sid), await store.runs.of_sweep(sid),
                       await store.jobs.of_sweep(sid))
    # At most 8 confirming runs left, 8 at a time: one more wave, not eight.
    assert (p["runs_most"], p["runs_done"], p["eta_s"], p["eta_guess"]) == (16, 8, 300, False)


def test_progress_of_an_ended_sweep_and_slurm_time_limits() -> None:
    from sweepd.store.rows import Sweep

    sweep = Sweep(1, "network", "n", json.dumps({"nodes": NODES}), SweepState.DONE, None,
                  None, "2026-01-01T00:00:00.000Z", "2026-01-01T01:30:00.000Z")
    p = sweep_progress(sweep, [], [])
    assert p["elapsed_s"] == 5400 and p["eta_s"] == 0 and p["runs_most"] == 0   # ended
    check_golden(GOLDEN / "cli" / "progress_ended.txt", p["line"] + "\n")
    assert [slurm_seconds(t) for t in ("30", "1:30", "02:00:00", "1-12", "2-00:30:00", "x")] \
        == [1800, 90, 7200, 129600, 174600, None]


# -- list filters and the submitter ------------------------------------------------------

async def test_list_filters_newest_first_with_the_submitter(daemon: Daemon, tmp_path: Path
                                                           ) -> None:
    perf = write_spec(tmp_path, GOOD_YAML)
    nodes = write_spec(tmp_path, f"kind: node-perf\nnodes: {NODES!r}\n", "n.yaml")
    for spec in (perf, nodes, perf):
        assert (await daemon.run("submit", spec))[0] == 0
    await daemon.service.submit(SPEC)   # not over the socket: no submitter
    await daemon.store.sweeps.transition(3, SweepState.RUNNING, "started")

    async def ids(*argv: str) -> list[int]:
        code, out, err = await daemon.run("list", *argv, "--json")
        assert code == 0, err
        return [s["id"] for s in json.loads(out)]

    assert await ids() == [4, 3, 2, 1]
    assert await ids("--kind", "node-perf") == [2]
    assert await ids("--state", "queued") == [4, 2, 1]
    assert await ids("--state", "running", "--kind", "model-perf") == [3]
    assert await ids("--mine") == [3, 2, 1]
    assert await ids("--since", "1h") == [4, 3, 2, 1]
    assert await ids("--since", "2999-01-01") == []
    code, out, _ = await daemon.run("show", "1", "--json")
    assert json.loads(out)["submitted_by"] == ME
    code, out, _ = await daemon.run("list", "--since", "yesterday", "--json")
    assert code == 2 and "--since 'yesterday'" in json.loads(out)["error"]
    code, _, err = await daemon.run("list", "--state", "bogus")
    assert code == 2 and "invalid choice" in err


# -- validate, submit --dry-run ----------------------------------------------------------

async def test_validate_prints_the_plan_and_records_nothing(daemon: Daemon, tmp_path: Path
                                                            ) -> None:
    spec = write_spec(tmp_path, GOOD_YAML)
    code, out, _ = await daemon.run("validate", spec)
    assert code == 0
    # The plan a person reads before submitting: nodes, first runs, memory, the most it runs.
    check_golden(GOLDEN / "cli" / "validate.txt", scrubbed(out, tmp=tmp_path))
    code, dry, _ = await daemon.run("submit", spec, "--dry-run")
    assert code == 0 and dry == out
    code, out, _ = await daemon.run("validate", spec, "--json")
    plan = json.loads(out)
    assert plan["most_jobs"] == 36 and plan["most_node_runs"] == 96
    assert plan["first_plan"]["runs"][0]["params"] == {
        "overrides": {"per_device_batch_size": 4}}
    assert await daemon.store.sweeps.all() == []
    stranger = write_spec(tmp_path, "kind: node-perf\nnodes: 'zzz[1-3]'\n", "x.yaml")
    code, out, _ = await daemon.run("validate", stranger, "--json")
    assert code == 2
    refusals = {"nodes of another cluster (--json)": json.loads(out)["error"]}
    code, _, err = await daemon.run("validate", write_spec(tmp_path, "kind: x\n", "y.yaml"))
    assert code == 2
    refusals["an unknown kind"] = err
    check_golden_cases(GOLDEN / "cli" / "validate_refusals.txt", {
        k: scrubbed(v, tmp=tmp_path) for k, v in refusals.items()})
    assert await daemon.store.sweeps.all() == []


async def test_validate_node_hours_from_earlier_jobs(daemon: Daemon, tmp_path: Path) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    await _finished_job(daemon.store, sid, "b=1", 1800)
    code, out, _ = await daemon.run("validate", write_spec(tmp_path, GOOD_YAML), "--json")
    plan = json.loads(out)
    assert code == 0 and plan["most_node_hours"] == 96 * 3 * 0.5   # node-runs x attempts x 0.5 h
    check_golden(GOLDEN / "cli" / "validate_node_hours_basis.txt", plan["node_hours_basis"] + "\n")


# -- models, status ----------------------------------------------------------------------

async def test_models_and_the_repos_configs_in_submit_sh_mode(daemon: Daemon, tmp_path: Path
                                                              ) -> None:
    code, out, _ = await daemon.run("models")
    header, first = out.splitlines()[:2]
    assert code == 0 and header.split()[:3] == ["MODEL", "PARAMS", "(B)"]
    assert first.split()[:4] == ["llama2-70b", "70", "70", "80"]
    code, out, _ = await daemon.run("models", "--json")
    assert json.loads(out)["configs"] is None
    (tmp_path / "repo" / "configs").mkdir(parents=True)
    for name in ("llama2-70b.gpu.yml", "grok-1.gpu.yml", "notes.txt"):
        (tmp_path / "repo" / "configs" / name).write_text("x: 1\n")
    engine = daemon.service.engine
    engine.config = engine.config.model_copy(update={"cluster": engine.config.cluster.model_copy(
        update={"backend": "slurm", "slurm": engine.config.cluster.slurm.model_copy(
            update={"mode": "submit_sh", "repo": tmp_path / "repo"})})})
    code, out, _ = await daemon.run("models")
    # The repo's configs, below the model table (tested on its own above).
    check_golden(GOLDEN / "cli" / "models_submit_sh.txt", out.split("\n\n", 1)[1])


async def test_status(daemon: Daemon) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    await _finished_job(daemon.store, sid, "b=1", 60)
    await daemon.store.sweeps.transition(sid, SweepState.RUNNING, "started", progress="hello")
    code, out, _ = await daemon.run("status")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("sweepd 0.1.0, up ")
    # Below the version and uptime: this test's engine is never stepped (no pass yet).
    check_golden(GOLDEN / "cli" / "status_lines.txt", "\n".join(lines[1:6]) + "\n")
    daemon.service.health.engine_pass()
    code, out, _ = await daemon.run("status", "--json")
    s = json.loads(out)
    assert s["jobs"] == {"done": 1} and s["last_pass_ago_s"] is not None
    assert s["backend_reachable"] is True and s["version"] == "0.1.0"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == "sweepd 0.1.0\n"


# -- logs --------------------------------------------------------------------------------

LOG = ["== Training started",
       "0: [INFO] ECC check: 0 uncorrectable errors on chi2832",
       "0: step 3, loss 2.1",
       "2: :0:rocdevice.cpp: Callback: Queue aborting with error : HSA_STATUS_ERROR_EXCEPTION",
       "the end"]


async def test_logs_marks_false_positives_and_the_evidence(daemon: Daemon, tmp_path: Path
                                                           ) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    log = tmp_path / "job.log"
    log.write_text("\n".join(LOG) + "\n")
    await _finished_job(daemon.store, sid, "b=1", 60, log, failure_line=LOG[3])
    code, out, err = await daemon.run("logs", str(sid))
    assert code == 0 and out.splitlines() == LOG   # plain: not a terminal
    check_golden(GOLDEN / "cli" / "logs_header_failed.txt", scrubbed(err, tmp=tmp_path))
    for which in ("1", "id:1"):
        code, out, _ = await daemon.run("logs", str(sid), which, "--json")
        marks = [json.loads(line)["mark"] for line in out.splitlines()]
        assert marks == ["", "false_positive", "", "evidence", ""]
    code, out, _ = await daemon.run("logs", str(sid), "7", "--json")
    assert code == 2 and "no run #7" in json.loads(out)["error"]
    code, _, err = await daemon.run("logs", "99")
    assert code == 2 and "sweep 99 not found" in err


def test_log_styles_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="standard", soft_wrap=True)
    for mark in ("", "false_positive", "evidence"):
        console.print(log_text({"text": "a \x1b[31m line \x1b]0;t\x07", "mark": mark}, True))
    plain, dim, evidence = out.getvalue().splitlines()
    # The log's own colour (SGR) is rendered; any other escape is shown, not obeyed.
    assert plain == "a \x1b[31m line \\x1b]0;t\\x07\x1b[0m"
    assert dim.startswith("\x1b[2m") and "\x1b[1;7;31m" in evidence


def test_log_colours_are_dropped_off_a_terminal() -> None:
    text = log_text({"text": "\x1b[1;32mPASS\x1b[0m step 3 \x1b[2J\r", "mark": ""})
    assert text.plain == "PASS step 3 \\x1b[2J\\r"


def test_a_logs_tabs_are_shown_as_tabs_its_other_controls_escaped() -> None:
    # A tab is layout (aligned columns in a log), not an escape to defuse.
    line = {"text": "step\t3\tloss 1.5\x1b[2J\r", "mark": ""}
    assert log_text(line).plain == "step\t3\tloss 1.5\\x1b[2J\\r"
    for terminal in (False, True):
        out = io.StringIO()
        Console(file=out, force_terminal=terminal, color_system="standard",
                soft_wrap=True).print(log_text(line, terminal))
        shown = out.getvalue().rstrip("\n")
        assert "\\t" not in shown and "\\x1b[2J\\r" in shown and "\x1b[2J" not in shown
        assert shown.startswith("step    3       loss 1.5"), shown   # tab stops of 8


async def test_logs_follow_until_the_job_ends(daemon: Daemon, tmp_path: Path) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    run = await daemon.store.runs.add(sid, "b=1",
                                          RunParams(overrides={"per_device_batch_size": 1}), NODES,
                                          "t")
    job = await daemon.store.jobs.create(run, "tok", "name", NODES)
    log = tmp_path / "job.log"
    log.write_text("first\n")
    await daemon.store.jobs.transition(job.id, JobState.QUEUED, "q", backend_id="b1",
                                           log_path=str(log))
    await daemon.store.jobs.transition(job.id, JobState.RUNNING, "r")
    follow = asyncio.create_task(daemon.run("logs", str(sid), "-f"))
    await asyncio.sleep(0.2)
    with log.open("a") as f:
        f.write("second\nthird, not yet ended")
    await asyncio.sleep(0.2)
    assert not follow.done()   # the job still runs: the follower waits for more
    await daemon.store.jobs.transition(job.id, JobState.DONE, "ended", ended_at=2.0)
    code, out, _ = await follow
    assert code == 0 and out.splitlines() == ["first", "second", "third, not yet ended"]


# -- --state-dir -------------------------------------------------------------------------

async def test_report_explain_and_logs_read_a_state_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    store = await Store.open(state / "sweepd.db")
    sid = await store.sweeps.create("model-perf", "offline", {**SPEC, "max_runs": 12})
    log = tmp_path / "job.log"
    log.write_text("\n".join(LOG) + "\n")
    await _finished_job(store, sid, "b=1", 60, log, failure_line=LOG[3])
    await store.close()
    before = hashlib.sha256((state / "sweepd.db").read_bytes()).hexdigest()
    listing = sorted(p.name for p in state.iterdir())

    async def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()   # a CLI process: no event loop of its own running
        code = await asyncio.to_thread(main, [*argv, "--socket",
                                              str(tmp_path / "no-daemon.sock")])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = await run("report", str(sid), "--state-dir", str(state))
    assert code == 0 and out.startswith(f"# Sweep {sid}: offline")
    code, out, _ = await run("explain", str(sid), "--state-dir", str(state), "--json")
    assert code == 0 and json.loads(out)["events"][0]["reason"] == "sweep submitted"
    code, out, _ = await run("logs", str(sid), "--state-dir", str(state))
    assert code == 0 and out.splitlines() == LOG
    code, _, err = await run("report", str(sid), "--state-dir", str(state), "--plot",
                             str(tmp_path / "p.png"))
    assert code == 0 and (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    code, out, _ = await run("report", "9", "--state-dir", str(state), "--json")
    assert code == 2 and json.loads(out)["error"] == "sweep 9 not found"
    code, _, err = await run("explain", "1", "--state-dir", str(tmp_path / "nowhere"))
    assert code == 2 and "no sweepd database at" in err
    # Read-only: the database is unchanged (WAL readers may add SQLite's -shm/-wal files,
    # never a lock file), and a write through the read-only store is refused.
    assert hashlib.sha256((state / "sweepd.db").read_bytes()).hexdigest() == before
    assert {p.name for p in state.iterdir()} - {"sweepd.db-shm", "sweepd.db-wal"} == \
        set(listing)
    readonly = await Store.open_readonly(state / "sweepd.db")
    try:
        with pytest.raises(aiosqlite.OperationalError, match="readonly"):
            await readonly.events.add(sid, "note", "must not land")
    finally:
        await readonly.close()


# -- completion, --json errors -----------------------------------------------------------

def _complete(script: Path, words: list[str], env: dict[str, str]) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    out = subprocess.run(
        ["bash", "-c", f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                       "_shtab_sweepd; printf '%s\\n' \"${COMPREPLY[@]}\""],
        capture_output=True, text=True, env=env, check=True, timeout=60)
    return out.stdout.split()


async def test_bash_completion_offers_verbs_flags_and_sweep_ids(
        daemon: Daemon, tmp_path: Path) -> None:
    for _ in range(2):
        await daemon.service.submit(SPEC)
    code, out, _ = await daemon.run("completion", "bash")
    script = tmp_path / "sweepd.bash"
    script.write_text(out)
    env = {**os.environ, "SWEEPD_SOCKET": str(daemon.socket),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    assert await asyncio.to_thread(_complete, script, ["sweepd", "va"], env) == ["validate"]
    assert "status" in await asyncio.to_thread(_complete, script, ["sweepd", ""], env)
    assert await asyncio.to_thread(_complete, script, ["sweepd", "list", "--mi"], env) \
        == ["--mine"]
    assert await asyncio.to_thread(_complete, script, ["sweepd", "logs", ""], env) == ["2", "1"]
    code, out, _ = await daemon.run("_ids", "--json")
    assert code == 0 and json.loads(out) == [2, 1]
    code, out, _ = await daemon.run("completion", "zsh")
    assert code == 0 and out.startswith("#compdef sweepd")
    assert "_sweepd_ids() {" in out and ":sweep id:_sweepd_ids" in out


@pytest.mark.parametrize("argv", [["status"], ["models"], ["list"], ["show", "1"],
                                  ["watch", "1"], ["logs", "1"],
                                  ["explain", "1"]])
def test_json_errors_when_no_daemon_runs(argv: list[str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*argv, "--json", "--socket", str(tmp_path / "none.sock")])
    body = json.loads(capsys.readouterr().out)
    # Not running at all is exit 1 at once, for watch too (5 is for a daemon lost midway).
    assert code == body["exit"] == 1 and "sweepd is not running at" in body["error"]


# -- watch across a daemon restart, and submit --follow ----------------------------------

def _watch_proc(sock: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sweepd", *argv, "--socket", str(sock)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rest(watcher: subprocess.Popen[str]) -> tuple[str, str]:
    """Stdout and stderr until the watcher exits. Not communicate(): it reads the pipes
    itself and drops what an earlier readline() had already read ahead (a lost line)."""
    assert watcher.stdout is not None and watcher.stderr is not None
    with watcher.stdout, watcher.stderr:
        out = watcher.stdout.read()
        err = watcher.stderr.read()
    watcher.wait(timeout=90)
    return out, err


def test_watch_resumes_after_a_daemon_restart_without_gap_or_repeat(tmp_path: Path) -> None:
    proc = DaemonProc(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        client = proc.start()
        sid = int(client.submit(perf_spec(values=[4, 6, 8, 10]))["id"])
        watcher = _watch_proc(proc.socket, "watch", str(sid), "--json")
        assert watcher.stdout is not None
        # Stop once the watcher has printed a finished run: then, not after polling the
        # daemon (on a loaded machine the sweep had ended by the time a poll saw it).
        before = [watcher.stdout.readline()]   # it follows the sweep
        while json.loads(before[-1])["progress"]["runs_done"] < 1:
            before.append(watcher.stdout.readline())
        assert proc.stop(signal.SIGTERM) == 0
        time.sleep(0.5)   # the watcher finds the daemon gone and keeps trying
        client = proc.start()
        out, err = _rest(watcher)
        shown = client.reads.show(sid)
        assert client.status()["last_pass_ago_s"] is not None   # the daemon's engine passes
    finally:
        proc.kill()
    assert watcher.returncode == 0, err
    assert "reconnecting" in err
    lines = [json.loads(line) for line in [*before, *out.splitlines()]]
    printed = [line["id"] for line in lines]
    # Each line carries where the sweep was; after the verdict every run is done.
    assert lines[-1]["progress"]["runs_done"] == len(shown["run_list"]) >= 2
    progress = [e["id"] for e in shown["events"] if e["kind"] == "progress"]
    assert printed == progress and len(progress) >= 3


def test_watch_exits_5_when_the_daemon_does_not_come_back(tmp_path: Path) -> None:
    proc = DaemonProc(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        client = proc.start()
        sid = int(client.submit(perf_spec())["id"])
        watcher = _watch_proc(proc.socket, "watch", str(sid), "--reconnect", "1", "--json")
        assert watcher.stdout is not None
        first = watcher.stdout.readline()   # it follows the sweep: then the daemon goes
        proc.stop(signal.SIGTERM)
        out, _ = _rest(watcher)
    finally:
        proc.kill()
    assert watcher.returncode == 5 and json.loads(first)["id"]
    last: dict[str, Any] = json.loads(out[out.index('{\n'):])
    assert last["exit"] == 5 and "could not reconnect within 1s" in last["error"]


async def test_submit_follow_watches_until_the_sweep_ends(daemon: Daemon, tmp_path: Path
                                                          ) -> None:
    follow = asyncio.create_task(daemon.run("submit", write_spec(tmp_path, GOOD_YAML),
                                            "--follow"))
    while not await daemon.store.sweeps.all():
        await asyncio.sleep(0.02)
    await daemon.store.sweeps.transition(1, SweepState.RUNNING, "started", progress="go")
    await daemon.store.sweeps.transition(1, SweepState.DONE, "the end", progress="done!")
    code, out, err = await follow
    assert code == 0 and out.splitlines()[:3] == ["1", "go", "done!"]
    # The end line, less its last part (the wall-clock time the sweep took).
    check_golden(GOLDEN / "cli" / "follow_end_line.txt",
                 out.splitlines()[3].rsplit(" · ", 1)[0] + "\n")
    assert "follow it with" not in err


# -- status against the real local Slurm cluster ----------------------------------------

@pytest.mark.slurm
async def test_status_says_whether_slurmctld_answers(slurm_env: dict[str, str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from sweepd.api.server import start_server
    from sweepd.app.service import Service
    from sweepd.clusters.factory import make_backend
    from sweepd.config import load_config
    from sweepd.core.engine import Engine
    from tests.slurm_cluster import run_cluster_script, stop_controller

    config = load_config(None, {"daemon.state_dir": str(tmp_path), "cluster.backend": "slurm",
                                "cluster.slurm": {"slurm_conf": slurm_env["SLURM_CONF"],
                                                  "train_command": ["true"]}})
    store = await Store.open(tmp_path / "sweepd.db")
    backend, clock = make_backend(config)
    runner = await start_server(Service(Engine(store, backend, clock, config)),
                                tmp_path / "s.sock")

    async def status() -> dict[str, Any]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["status", "--json", "--socket",
                                              str(tmp_path / "s.sock")])
        assert code == 0
        return dict(json.loads(capsys.readouterr().out))

    try:
        up = await status()
        assert (up["backend"], up["backend_reachable"], up["backend_problem"]) == \
            ("slurm", True, None)
        await stop_controller()
        down = await status()
        assert down["backend_reachable"] is False and down["backend_problem"]
    finally:
        start = run_cluster_script("start")
        check = run_cluster_script("check")
        await runner.cleanup()
        await backend.close()
        await store.close()
    assert start.returncode == 0 and check.returncode == 0, start.stderr + check.stderr


# -- progress of stopped sweeps; the scheduler's job id; a queued job's log --------------

async def test_stopped_sweeps_show_complete_runs_and_no_eta(daemon: Daemon) -> None:
    done = int((await daemon.service.submit(SPEC))["id"])
    await daemon.store.sweeps.transition(done, SweepState.RUNNING, "started")
    for label in ("b=1", "b=2"):   # two at once, 60 cluster seconds each
        await _finished_job(daemon.store, done, label, 60)
    p = (await daemon.service.summary(done))["progress"]
    # Between two jobs: the line must not say that nothing will run.
    lines = {"between two jobs": p["line"]}
    await daemon.store.sweeps.transition(done, SweepState.AWAITING_DECISION, "stop")
    p = (await daemon.service.summary(done))["progress"]
    assert p["eta_s"] == 0
    lines["stopped"] = p["line"]
    await daemon.store.sweeps.transition(done, SweepState.RUNNING, "resumed")
    await daemon.store.sweeps.transition(done, SweepState.DONE, "verdict")
    never = int((await daemon.service.submit(SPEC))["id"])
    run = await daemon.store.runs.add(never, "b=1",
                                          RunParams(overrides={"per_device_batch_size": 1}), NODES,
                                          "t")
    await daemon.store.jobs.create(run, "tok-never", "name", NODES)
    assert (await daemon.run("abort", str(never)))[0] == 0
    code, out, _ = await daemon.run("show", str(done))
    assert "ETA" not in out
    lines["show of the ended sweep"] = next(
        line for line in out.splitlines() if line.startswith("  progress: "))
    check_golden_cases(GOLDEN / "cli" / "progress_stopped.txt", lines)
    code, out, _ = await daemon.run("show", str(never))
    assert "  progress: no run ran · " in out and "ETA" not in out
    code, out, _ = await daemon.run("list")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows[str(done)][3:7] == ["2/2", "-", "1m", "-"]
    assert rows[str(never)][3] == "0/0"


async def test_logs_by_the_schedulers_job_id_and_of_a_queued_job(daemon: Daemon,
                                                                 tmp_path: Path) -> None:
    sid = int((await daemon.service.submit(SPEC))["id"])
    await _finished_job(daemon.store, sid, "b=1", 60)   # sweepd job 1, run #1
    run = await daemon.store.runs.add(sid, "b=2",
                                          RunParams(overrides={"per_device_batch_size": 2}), NODES,
                                          "t")
    job = await daemon.store.jobs.create(run, "tok-2", "name", NODES)
    log = tmp_path / "queued.log"
    await daemon.store.jobs.transition(job.id, JobState.QUEUED, "q", backend_id="10018",
                                           submitted_at=1.0, log_path=str(log))
    for which in ("10018", "j10018", "2"):   # the scheduler's id, or run #2
        code, out, err = await daemon.run("logs", str(sid), which)
        assert (code, out) == (0, ""), err
        check_golden(GOLDEN / "cli" / "logs_queued.txt", scrubbed(err, tmp=tmp_path))
    code, out, _ = await daemon.run("logs", str(sid), "77", "--json")
    assert code == 2 and "no job the scheduler calls 77" in json.loads(out)["error"]
    code, out, _ = await daemon.run("logs", str(sid), "j5", "--json")
    assert code == 2 and "scheduler job 5 is not one" in json.loads(out)["error"]
    follow = asyncio.create_task(daemon.run("logs", str(sid), "j10018", "-f"))
    # Time for the follower's first request at CI load (0.3 s was too short at load 8).
    await asyncio.sleep(2.0)
    assert not follow.done()   # queued: the follower waits for the job to start
    log.write_text("\x1b[1;32mstarted\x1b[0m\n")
    await daemon.store.jobs.transition(job.id, JobState.RUNNING, "r")
    await daemon.store.jobs.transition(job.id, JobState.DONE, "ended", ended_at=9.0)
    code, out, err = await follow
    # Off a terminal the log's colours are dropped, not printed as `\x1b[1;32m`.
    assert code == 0 and out == "started\n" and "waiting for it to start" in err


def test_logs_help_says_which_number_is_which(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["logs", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "RUN|JOBID" in help_text
    # The positional arguments' part (the global flags' help is another test's).
    positional = help_text.split("positional arguments:")[1].split(" options:")[0]
    check_golden(GOLDEN / "cli" / "logs_help_positional.txt", positional.strip() + "\n")
