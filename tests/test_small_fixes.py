"""Issue 23 item 8, the smaller defects: each test failed before its fix."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweepd.cli import main as cli_main
from sweepd.cli.listing import _list_row
from sweepd.cli.output import print_failure
from sweepd.config import load_config
from sweepd.core.policy import Act, Case, SweepFacts, decide, queued_node_fault
from sweepd.kinds.registry import Demo, kind_of
from sweepd.monitor.facts import FailureClass, Verdict
from sweepd.reports.report import report_markdown
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import write_scenario


def test_below_minimum_names_min_nodes_and_counts_right() -> None:
    """"excluding X leaves 1 nodes; the model needs 2": the 2 is the sweep's min_nodes."""
    limits = load_config(None).policy
    v = Verdict(FailureClass.GPU_HARDWARE, node="n2", evidence="HSA_STATUS_ERROR")
    one = decide(Case(v, [], SweepFacts(["n1", "n2"], [], 2), limits))
    assert one.rule == "nodes.below_minimum"
    two = decide(Case(v, [], SweepFacts(["n1", "n2", "n3"], [], 3), limits))
    assert two.rule == "nodes.below_minimum"
    queued, _ = queued_node_fault(["n2"], SweepFacts(["n1", "n2"], [], 2), limits)
    assert queued.act == Act.STOP
    check_golden_cases(GOLDEN / "small_fixes" / "below_minimum.txt", {
        "1 node left of min 2": one.reason, "2 nodes left of min 3": two.reason,
        "a queued job's node": queued.reason})


def test_a_refusal_about_one_field_prints_its_message_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    what = ("sweep 1 would have 1 usable node(s) of its 3 pinned (chi1); its min_nodes "
            "needs 2: readmit a node (--readmit NODE), or abort")
    print_failure(what, [{"loc": ["exclude"], "msg": what}])
    err = capsys.readouterr().err
    assert err == f"sweepd: {what}\n"
    # Fields that add something are still listed under the headline.
    print_failure("invalid model-perf spec: values: too many", [{"loc": ["values"],
                                                                 "msg": "too many"}])
    check_golden(GOLDEN / "small_fixes" / "field_listed.txt", capsys.readouterr().err)


def _head(markdown: str) -> str:
    """A report's head: the list under its title (kind, model, nodes, state, jobs)."""
    return markdown.split("\n\n")[1] + "\n"


async def test_jobs_submitted_counts_only_what_reached_the_scheduler(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    try:
        sid = await store.sweeps.create("model-perf", "t", {"model": "llama2-70b",
                                                            "nodes": "chi[1-2]"})
        run = await store.runs.add(sid, "per_device_batch_size=8", RunParams(), "chi[1-2]", "t")
        for i, backend_id in enumerate(("101", "102", None)):
            job = await store.jobs.create(run, f"tok{i}", "JAX-x", "chi[1-2]")
            if backend_id:
                await store.jobs.update(job.id, backend_id=backend_id)
        text = report_markdown(kind_of("model-perf").report, await store.sweeps.get(sid),
                               await store.runs.of_sweep(sid), await store.jobs.of_sweep(sid),
                               [])
        # The third row was refused before the scheduler saw it (e.g. a job name too long):
        # the report's head says it.
        check_golden(GOLDEN / "small_fixes" / "jobs_submitted_refused.txt",
                     _head(text))
    finally:
        await store.close()


def test_list_and_top_show_runs_alike() -> None:
    from sweepd.cli.output import runs_cell
    from sweepd.cli.top_fields import progress_of

    ended = {"id": 1, "state": "failed", "kind": "model-perf",
             "progress": {"runs_done": 0, "runs_most": 0, "ended": True, "jobs_queued": 0,
                          "jobs_running": 0, "eta_s": None, "eta_guess": False,
                          "elapsed_s": 0}}
    assert _list_row(ended)["runs"] == "0/0"
    assert runs_cell(*progress_of(ended), ended=True) == "0/0"   # top said 0/?
    going = {**ended, "state": "running",
             "progress": {**ended["progress"], "runs_done": 4, "runs_most": 12,
                          "ended": False}}
    assert _list_row(going)["runs"] == runs_cell(*progress_of(going), ended=False) == "4/≤12"


async def test_top_leaves_a_gap_between_the_runs_and_the_bar() -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import Label, ListView, ProgressBar

    from sweepd.cli.top import TopApp
    from sweepd.cli.top_widgets import SweepRow

    sweep = {"id": 1234, "state": "awaiting_decision", "kind": "xla-tuning",
             "progress": {"runs_done": 13, "runs_most": 13, "ended": True}}

    class Host(App[None]):
        CSS = TopApp.CSS

        def compose(self) -> ComposeResult:
            yield ListView(SweepRow(sweep), id="sweeps")

    app = Host()
    async with app.run_test(size=(160, 10)) as pilot:
        await pilot.pause()
        what = app.query_one(".what", Label)
        text = str(what.render()).rstrip()
        assert text.endswith("13/13"), text
        bar = app.query_one(ProgressBar)
        # The text ends at least one column before the bar starts ("13/13━━━" was glued).
        assert what.region.x + len(text) < bar.region.x, (text, what.region, bar.region)


def test_list_state_cancelled_is_accepted() -> None:
    parser = cli_main.build_parser()
    args = parser.parse_args(["list", "--state", "cancelled", "running"])
    assert args.state == ["cancelled", "running"]


def test_a_demo_removes_the_state_directory_it_made(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`sweepd demo` without --state-dir made /tmp/sweepd-run-* and left it behind."""
    scenario = write_scenario(tmp_path, time_scale=0.002)
    tiny = Demo("a tiny demo", scenario, [{"kind": "node-perf", "nodes": "chi[2832,2863,2867]"}])
    real = kind_of("node-perf")
    monkeypatch.setattr(cli_main, "kind_of", lambda _: replace(real, demo=tiny))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)   # read TMPDIR again
    args = argparse.Namespace(kind="node-perf", state_dir=None, config=None, tick=0.02)
    assert cli_main.cmd_demo(args) == 0
    out = capsys.readouterr().out
    assert list((tmp_path / "tmp").iterdir()) == []
    assert "--state-dir " + str(tmp_path) not in out
    # Given a --state-dir, the demo keeps it (and says how to read it again).
    kept = tmp_path / "kept"
    args = argparse.Namespace(kind="node-perf", state_dir=kept, config=None, tick=0.02)
    assert cli_main.cmd_demo(args) == 0
    assert (kept / "sweepd.db").exists()
    # Each demo's last line: where its state is, or that it goes.
    check_golden_cases(GOLDEN / "small_fixes" / "demo_state_dir.txt", {
        "without --state-dir": out.splitlines()[-1],
        "with --state-dir": scrubbed(capsys.readouterr().out.splitlines()[-1], tmp=tmp_path)})




def test_the_failed_markers_are_not_under_the_legend() -> None:
    from matplotlib.transforms import Bbox

    from sweepd.kinds.model_perf.plot import perf_curve_figure
    from sweepd.reports.plots import png

    # Failures at the high end (the OOMs), where a lower-right legend sat.
    fig = perf_curve_figure([(4, 1100.0), (8, 1300.0), (10, 1390.0), (12, 1350.0)],
                            [14, 16], 10, "per_device_batch_size", "llama2-70b 2N")
    png(fig)   # lays the figure out as it is sent
    [ax] = fig.axes
    legend = ax.get_legend()
    assert legend is not None
    box = legend.get_window_extent()
    failed = next(line for line in ax.get_lines() if line.get_label() == "failed")
    half = failed.get_markersize() / 2 * fig.dpi / 72   # the marker's reach, in pixels
    for x, y in ax.transData.transform(failed.get_xydata()):
        # No part of the marker under the legend (the old one covered all but a sliver).
        assert not Bbox([[x - half, y - half], [x + half, y + half]]).overlaps(box), \
            ((x, y), box)
    # And the legend is whole, inside the picture.
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), box


def test_list_state_cancelled_shows_the_sweeps_cancel_ended(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sweepd.cli import listing

    progress = {"runs_done": 1, "runs_most": 1, "ended": True, "jobs_queued": 0,
                "jobs_running": 0, "eta_s": None, "eta_guess": False, "elapsed_s": 60}
    sweeps = [{"id": i, "state": state, "kind": "model-perf", "reason": reason, "name": f"s{i}",
               "submitted_by": "me", "updated_at": "2026-12-01T00:00:00Z",
               "progress": progress}
              for i, state, reason in ((3, "aborted", "cancelled by a person: job(s) 9 "
                                        "cancelled"), (2, "aborted", "aborted by a person"),
                                       (1, "running", None))]
    asked: list[list[str]] = []

    class Client:
        def find_sweeps(self, states: list[str], *_: Any) -> list[dict[str, Any]]:
            asked.append(states)
            return [s for s in sweeps if s["state"] in states]

    monkeypatch.setattr(listing, "with_client", lambda _args, body: body(Client()))
    args = cli_main.build_parser().parse_args(["list", "--state", "cancelled"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert asked == [["aborted"]]              # what the daemon stores a cancel as
    assert "s3" in out and "s2" not in out     # the abort without `cancel` is not one
    # Asking for aborted as well shows every abort, cancels among them.
    args = cli_main.build_parser().parse_args(["list", "--state", "cancelled", "aborted"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert asked[-1] == ["aborted"] and "s3" in out and "s2" in out


async def test_a_campaign_report_counts_its_stage_sweeps_jobs(tmp_path: Path) -> None:
    from sweepd.app.queries import Queries
    from sweepd.store.campaigns import Carried

    store = await Store.open(tmp_path / "s.db")
    try:
        parent = await store.sweeps.create("campaign", "c", {"model": "llama2-70b",
                                                                   "nodes": "chi[1-2]"})
        for stage, ids in (("health", ("201",)), ("batch", ("202", "203"))):
            child, _ = await store.campaigns.start_child(parent, Carried(stage), "model-perf",
                                                         stage, {"model": "llama2-70b"}, None)
            run = await store.runs.add(child, "x", RunParams(), "chi[1-2]", stage)
            for i, backend_id in enumerate(ids):
                job = await store.jobs.create(run, f"{stage}{i}", "JAX-x", "chi[1-2]")
                await store.jobs.update(job.id, backend_id=backend_id)
        got = await Queries(store).report(parent)
        # The campaign submits nothing itself: its stages' three jobs are what it cost.
        check_golden(GOLDEN / "small_fixes" / "jobs_submitted_campaign.txt",
                     _head(got["markdown"]))
        assert got["json"]["stage_jobs"] == 3 and got["json"]["jobs"] == 0
    finally:
        await store.close()


def test_a_best_at_the_lower_edge_of_the_range_says_so() -> None:
    from sweepd.kinds.model_perf.edges import best_at_edge
    from sweepd.kinds.model_perf.search import Outcome, Probe
    from sweepd.kinds.model_perf.search.space import batch_space
    from sweepd.kinds.model_perf.spec import ModelPerfSpec

    def spec(**extra: Any) -> ModelPerfSpec:
        return ModelPerfSpec.model_validate({"kind": "model-perf", "model": "llama2-70b",
                                             "nodes": "chi[2832,2863]", **extra})

    seen = [Probe(12, Outcome.OK, 900.0), Probe(14, Outcome.OK, 850.0)]
    cut = batch_space(16, lower=12, upper=16)
    said = best_at_edge(spec(lower=12, upper=16), cut, seen)
    check_golden(GOLDEN / "small_fixes" / "edge_lower.txt", f"{said}\n")
    # From 1 up there is nothing lower to try; a best inside the range says nothing.
    assert best_at_edge(spec(), batch_space(16), [Probe(1, Outcome.OK, 900.0)]) is None
    assert best_at_edge(spec(lower=12, upper=16), cut,
                        [*seen, Probe(13, Outcome.OK, 950.0)]) is None


def test_a_best_below_a_failed_given_value_names_the_batches_never_given() -> None:
    from sweepd.kinds.model_perf.edges import best_at_edge
    from sweepd.kinds.model_perf.search import Outcome, Probe
    from sweepd.kinds.model_perf.search.space import SearchSpace
    from sweepd.kinds.model_perf.spec import ModelPerfSpec

    spec = ModelPerfSpec.model_validate({"kind": "model-perf", "model": "llama2-70b",
                                         "nodes": "chi[2832,2863]", "values": [1, 2, 64]})
    space = SearchSpace(candidates=(1, 2, 64), estimate_index=None)
    seen = [Probe(1, Outcome.OK, 500.0), Probe(2, Outcome.OK, 900.0),
            Probe(64, Outcome.OOM, None)]
    said = best_at_edge(spec, space, seen)
    check_golden(GOLDEN / "small_fixes" / "edge_values_never_given.txt", f"{said}\n")
    # Adjacent values leave nothing between; a pass above says nothing of the kind.
    assert best_at_edge(spec, space, [*seen[:2], Probe(64, Outcome.OK, 800.0)]) is None


def test_a_best_at_the_largest_batch_run_says_memory_ruled_out_the_next() -> None:
    from sweepd.kinds.model_perf.edges import best_at_edge
    from sweepd.kinds.model_perf.search import Outcome, Probe
    from sweepd.kinds.model_perf.search.space import batch_space
    from sweepd.kinds.model_perf.spec import ModelPerfSpec

    spec = ModelPerfSpec.model_validate({"kind": "model-perf", "model": "llama2-70b",
                                         "nodes": "chi[2832,2863]"})

    def run(b: int, tgs: float) -> Probe:   # 12 GB a batch + 4 GB fixed, a 178.6 GB pool
        return Probe(b, Outcome.OK, tgs, temp_gb=12.0 * b, fixed_gb=4.0, limit_gb=178.6)

    seen = [run(10, 1000.0), run(14, 1100.0)]
    said = best_at_edge(spec, batch_space(40), seen)
    check_golden(GOLDEN / "small_fixes" / "edge_memory.txt", f"{said}\n")
    # A run above the best (its OOM, or a slower pass) says it; so does a best below.
    assert best_at_edge(spec, batch_space(40), [*seen, Probe(15, Outcome.OOM, None)]) is None
    assert best_at_edge(spec, batch_space(40), [run(6, 1000.0), run(8, 1100.0)]) is None
