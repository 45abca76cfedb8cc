"""`sweepd top` through textual's own test harness (`App.run_test()` and `Pilot`), against
a real daemon on the simulated cluster, moved by the sweeps' real events."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Label, Markdown, ProgressBar, Sparkline, Static

from sweepd.cli.main import main
from sweepd.cli.top import TopApp
from sweepd.cli.top_fields import progress_of, progress_text
from sweepd.cli.top_widgets import Confirm, SweepRow, TextScreen
from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, write_scenario

SIZE = (180, 50)
FAULTS = [{"kind": "hsa_error", "node": n, "times": 1} for n in ("chi2832", "chi2863", "chi2867")]


def _daemon(tmp_path: Path, faults: list[dict[str, Any]] | None = None) -> Iterator[Daemon]:
    extra = "\n[policy]\nmax_retries = 5\n"
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path, faults), extra))
    try:
        yield daemon
    finally:
        daemon.kill()


@pytest.fixture
def clean(tmp_path: Path) -> Iterator[Daemon]:
    yield from _daemon(tmp_path)


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[Daemon]:
    yield from _daemon(tmp_path, FAULTS)


async def until(pilot: Pilot[None], cond: Callable[[], bool], what: str) -> None:
    """Let the app run until `cond` holds (a bound, not a timing assert)."""
    for _ in range(1200):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"top never showed {what}")


def row(app: TopApp, sweep_id: int) -> SweepRow | None:
    rows = [r for r in app.query(SweepRow) if r.sweep_id == sweep_id]
    return rows[0] if rows else None


def state_of(app: TopApp, sweep_id: int) -> str | None:
    r = row(app, sweep_id)
    return str(r.sweep["state"]) if r else None


def label(app: TopApp, selector: str) -> str:
    return str(app.query_one(selector, Label).render())


async def test_a_sweep_submitted_while_watching_moves_to_done(clean: Daemon) -> None:
    client = clean.start()
    app = TopApp(clean.socket, list_every_s=0.2, long_poll_s=2)
    async with app.run_test(size=SIZE) as pilot:
        sweep_id = int(client.submit(perf_spec(values=[4, 8], name="[b]tags[/b] stay text"))["id"])
        await until(pilot, lambda: row(app, sweep_id) is not None, "the new sweep")
        await until(pilot, lambda: state_of(app, sweep_id) == "done", "the sweep done")
        shown = client.reads.show(sweep_id)
        r = row(app, sweep_id)
        assert r is not None
        bar = r.query_one(ProgressBar)
        assert (bar.progress, bar.total) == (2, 2)
        assert list(r.query_one(Sparkline).data or []) == [run["tgs"] for run in
                                                            shown["run_list"]]
        last = [e["reason"] for e in shown["events"] if e["kind"] == "progress"][-1]
        assert str(r.query_one(".latest", Label).render()) == last
        # The selected sweep's runs table, the same rows as the store's.
        table = app.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, "the runs table")
        assert [str(table.get_row_at(i)[1]) for i in range(2)] == [
            run["label"] for run in shown["run_list"]]
        jobs = app.query_one("#jobs", DataTable)
        assert jobs.row_count == len(shown["jobs"])
        assert [str(jobs.get_row_at(i)[3]) for i in range(jobs.row_count)] == [
            j["backend_id"] for j in shown["jobs"]]
        assert f"sweep {sweep_id}: [b]tags[/b] stay text" in label(app, "#title")
        await pilot.press("q")


async def test_stop_message_explain_report_resume_and_abort(faulty: Daemon) -> None:
    client = faulty.start()
    app = TopApp(faulty.socket, list_every_s=0.2, long_poll_s=2)
    async with app.run_test(size=SIZE) as pilot:
        sweep_id = int(client.submit(perf_spec(values=[8]))["id"])
        await until(pilot, lambda: state_of(app, sweep_id) == "awaiting_decision",
                    "the stop")
        stop = str(app.query_one("#stop", Static).render())
        assert stop and "exclu" in stop.lower()
        shown = client.reads.show(sweep_id)
        assert stop in [e["reason"] for e in shown["events"] if e["kind"] == "progress"]

        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "explain")
        assert "sweep submitted" in str(app.screen.query_one("#text-body", Static).render())
        await pilot.press("escape")
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the report")
        assert app.screen.query_one(Markdown).source.startswith(f"# Sweep {sweep_id}")
        await pilot.press("escape")

        # Resume asks first: "n" leaves the sweep as it is.
        await until(pilot, lambda: not isinstance(app.screen, TextScreen), "the view")
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        assert "Resume sweep" in str(app.screen.query_one("#question", Label).render())
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, Confirm), "the view")
        assert client.reads.show(sweep_id)["state"] == "awaiting_decision"
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: any((e.get("rule") or "").startswith("person.resume")
                                       for e in client.reads.show(sweep_id)["events"]),
                    "the resume")
        # Abort, confirmed with the button.
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.click("#yes")
        await until(pilot, lambda: state_of(app, sweep_id) == "aborted", "the abort")
        assert client.reads.show(sweep_id)["state"] == "aborted"
        await pilot.press("q")


def test_top_without_a_daemon_says_so(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--socket", str(tmp_path / "none.sock")]) == 1
    assert "not running" in capsys.readouterr().err



def test_sweepd_top_runs_in_a_terminal_and_q_quits(clean: Daemon) -> None:
    """The verb itself, on a pseudo-terminal: it draws its footer, and `q` leaves with 0."""
    clean.start()
    primary, secondary = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "sweepd", "top", "--socket", str(clean.socket)],
                            stdin=secondary, stdout=secondary, stderr=secondary,
                            env={**os.environ, "TERM": "xterm-256color"})
    os.close(secondary)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"explain" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen[-2000:]
            if select.select([primary], [], [], 0.5)[0]:
                seen += os.read(primary, 65536)
        os.write(primary, b"q")
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(primary)


def test_progress_reads_the_api_progress_object_and_falls_back_to_the_runs() -> None:
    given = {"state": "running", "run_list": [], "spec": {"max_runs": 12},
             "progress": {"runs_done": 4, "runs_most": 9, "line": "run 5 of ≤ 9 · ETA ≤ 1h"}}
    assert progress_of(given) == (4, 9) and progress_text(given) == "run 5 of ≤ 9 · ETA ≤ 1h"
    # The running job and its step, as `run`'s bar says them (the API sends `current_job`).
    running = {**given, "progress": {**given["progress"], "current_job": {
        "job": "10018", "last_step": 9, "steps_done": 10, "steps": 15}}}
    assert progress_text(running).endswith(" · job 10018 step 10/15")
    assert progress_of({**given, "progress": {"runs_done": 2, "runs_most": None}}) == (2, None)
    older = {"state": "running", "spec": {"max_runs": 12, "values": [4, 8, 12]},
             "run_list": [{"state": "passed"}, {"state": "active"}]}
    assert progress_of(older) == (1, 3) and progress_text(older) == ""


async def test_an_80_by_24_terminal_keeps_the_latest_line_and_the_whole_dialog(
        faulty: Daemon) -> None:
    """The smallest usual terminal: each sweep row still shows a useful part of its latest
    line, and the confirmation (a stop message can be longer than the screen) keeps its
    buttons on screen; its question scrolls."""
    from textual.geometry import Region

    client = faulty.start()
    app = TopApp(faulty.socket, list_every_s=0.2, long_poll_s=2)
    screen = Region(0, 0, 80, 24)
    async with app.run_test(size=(80, 24)) as pilot:
        sweep_id = int(client.submit(perf_spec(values=[8]))["id"])
        await until(pilot, lambda: state_of(app, sweep_id) == "awaiting_decision", "the stop")
        r = row(app, sweep_id)
        assert r is not None
        latest = r.query_one(".latest", Label)
        await until(pilot, lambda: bool(str(latest.render())), "the latest line")
        assert latest.region.width >= 30 and screen.contains_region(latest.region), \
            latest.region
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.pause()
        question = app.screen.query_one("#question", Label)
        assert "Resume sweep" in str(question.render())
        # Its lines wrap inside the dialog: none runs past the screen's edge.
        assert question.region.width < app.screen.query_one("#confirm").region.width, \
            question.region
        for button in ("#yes", "#no"):
            region = app.screen.query_one(button).region
            assert region.area and screen.contains_region(region), (button, region)
        await pilot.click("#no")
        await until(pilot, lambda: not isinstance(app.screen, Confirm), "the view")
        assert client.reads.show(sweep_id)["state"] == "awaiting_decision"
        await pilot.press("q")
