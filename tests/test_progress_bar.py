"""The live bar of `sweepd run` and `sweepd watch` on a terminal (cli/progress_bar.py):
under a pseudo-terminal the bar's figures appear below intact event lines; under a pipe
the plain lines, with no bar and no terminal codes."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import yaml

from sweepd.app.progress import bar_line
from sweepd.cli.progress_bar import bar_wanted
from tests.daemon_proc import Daemon, write_config
from tests.golden_files import GOLDEN, check_golden_cases
from tests.simrun import perf_spec, write_scenario

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = re.compile(r"run (\d+) of ≤ (\d+)(?: \(\d+ done\))? ▕[█░]{20}▏ (\d+) %")
STEP = re.compile(r"job \d+ step (\d+)/(\d+)")
GUARD_S = 300   # a hung child fails the test rather than the suite; not a timing assert


def _on_pty(argv: list[str]) -> tuple[int, str]:
    """Run `argv` with a pseudo-terminal (200 columns) as its stdin, stdout and stderr;
    its exit code and all it wrote."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env,
                            close_fds=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + GUARD_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:   # the child closed the terminal (EIO)
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return proc.wait(30), b"".join(chunks).decode()


def _screen_lines(written: str) -> list[str]:
    """What a terminal leaves on each line: the text after the line's last carriage
    return (the bar redraws over itself), terminal codes taken out."""
    return [CSI.sub("", part.split("\r")[-1])
            for part in written.replace("\r\n", "\n").split("\n")]


def _sweepd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweepd", *args]


def _bar_figures(written: str) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    text = CSI.sub("", written)
    bars = [(int(a), int(b), int(c)) for a, b, c in BAR.findall(text)]
    steps = [(int(a), int(b)) for a, b in STEP.findall(text)]
    return bars, steps


def test_bar_line_says_runs_done_of_the_most_the_step_and_the_eta() -> None:
    p: dict[str, Any] = {
        "runs_started": 4, "runs_done": 3, "runs_most": 12, "runs_planned": 12,
        "ended": False, "eta_s": 6360.0, "eta_guess": False,
        "current_job": {"job": "10018", "last_step": 8, "steps_done": 9, "steps": 15}}
    # No fixed most: no bar; no ETA yet: said so, as `show`'s line says it.
    check_golden_cases(GOLDEN / "progress_bar" / "bar_line.txt", {
        "4 of at most 12 runs, job 10018 at step 9 of 15, an ETA": bar_line(p),
        "no fixed most, no ETA, no job": bar_line({**p, "runs_most": None, "eta_s": None,
                                                   "current_job": None})})


def test_the_bar_is_off_on_a_pipe_with_json_and_on_a_dumb_terminal(
        monkeypatch: Any) -> None:
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty, os.fdopen(os.pipe()[1], "w") as pipe:
        monkeypatch.setenv("TERM", "xterm")
        assert bar_wanted(False, tty) and not bar_wanted(False, pipe)
        assert not bar_wanted(True, tty)
        monkeypatch.setenv("FORCE_COLOR", "1")   # CI's: a pipe is still a pipe
        assert not bar_wanted(False, pipe)
        monkeypatch.setenv("TERM", "dumb")
        assert not bar_wanted(False, tty)
    os.close(leader)


def _run_files(tmp_path: Path, name: str) -> tuple[Path, Path]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(perf_spec(values=[4, 6])))
    return spec, tmp_path / name


def test_run_on_a_terminal_shows_the_bar_under_intact_lines(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    spec, state = _run_files(tmp_path, "tty-state")
    code, written = _on_pty(_sweepd("run", str(spec), "--scenario", str(scenario),
                                    "--state-dir", str(state)))
    spec, piped_state = _run_files(tmp_path, "pipe-state")
    piped = subprocess.run(_sweepd("run", str(spec), "--scenario", str(scenario),
                                   "--state-dir", str(piped_state)),
                           capture_output=True, text=True, timeout=GUARD_S, check=False)
    assert code == piped.returncode == 0, written[-2000:]
    bars, steps = _bar_figures(written)
    # The bar counted the runs to their most (2 values), the running job's steps to 15.
    assert bars and {most for _, most, _ in bars} == {2} and max(p for *_, p in bars) >= 50
    assert steps and {of for _, of in steps} == {15} and max(s for s, _ in steps) >= 10
    # Off a terminal: the plain lines, nothing of the bar.
    assert "\x1b" not in piped.stdout and "▕" not in piped.stdout
    # Each of its lines (the state dir's apart) is a whole line on the terminal too.
    screen = _screen_lines(written)
    plain = [line for line in piped.stdout.splitlines()
             if "pipe-state" not in line and line.strip()]
    assert [line for line in plain if line not in screen] == []
    assert any(" — PASS" in line for line in plain)


def test_watch_on_a_terminal_shows_the_bar_and_plain_on_a_pipe(tmp_path: Path) -> None:
    proc = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        client = proc.start()
        sid = int(client.submit(perf_spec(values=[4, 6]))["id"])
        code, written = _on_pty(_sweepd("--socket", str(proc.socket), "watch", str(sid)))
        # Again once it has ended, on a pipe: every line from the start, plain.
        piped = subprocess.run(_sweepd("--socket", str(proc.socket), "watch", str(sid)),
                               capture_output=True, text=True, timeout=GUARD_S, check=False)
        reasons = [e["reason"] for e in client.reads.show(sid)["events"]
                   if e["kind"] == "progress"]
    finally:
        proc.kill()
    assert code == piped.returncode == 0, written[-2000:]
    bars, steps = _bar_figures(written)
    assert bars and {most for _, most, _ in bars} == {2}
    assert steps and {of for _, of in steps} == {15}
    assert "\x1b" not in piped.stdout and "▕" not in piped.stdout
    screen = _screen_lines(written)
    piped_lines = piped.stdout.splitlines()
    # Each event line whole on both; the watch started before the first, so all of them.
    assert reasons and [r for r in reasons if r not in screen] == []
    assert [r for r in reasons if r not in piped_lines] == []
    assert piped_lines[-1].startswith(f"sweep {sid}: done") and any(
        line.startswith(f"sweep {sid}: done") for line in screen)
