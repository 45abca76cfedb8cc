"""Plots: each kind's chart draws the sweep's results (the figure's artists are read back,
not only the PNG's bytes: an empty figure would still be a valid PNG)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from sweepd.app.daemon import open_parts
from sweepd.kinds.registry import kinds
from sweepd.kinds.xla_tuning import report as xla_report
from sweepd.reports import plots
from sweepd.store.rows import Run
from sweepd.store.store import Store
from tests.simrun import perf_spec, run, sim_config, write_scenario
from tests.support.xla import params, recorder, spec_of

KINDS = ("model_perf", "model_sweep", "node_perf", "network", "xla_tuning")


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Figure]]:
    """Every Figure a kind's chart renders, in order (each still rendered to its PNG)."""
    drawn: list[Figure] = []

    def keep(fig: Figure) -> bytes:
        drawn.append(fig)
        return plots.png(fig)

    for kind in KINDS:
        monkeypatch.setattr(importlib.import_module(f"sweepd.kinds.{kind}.plot"), "png", keep)
    yield drawn


def _bars(fig: Figure) -> list[Rectangle]:
    """The bars of `bar`/`barh` calls, in drawing order (not the bands of `axhspan`)."""
    return [bar for container in fig.axes[0].containers for bar in container
            if isinstance(bar, Rectangle)]


def _lines(fig: Figure, marker: str) -> list[Line2D]:
    return [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == marker]


def _batch(r: Run) -> float:
    return float(r.params.overrides["per_device_batch_size"])


async def test_model_perf_plot_draws_the_curve_the_failures_and_the_optimum(
        tmp_path: Path, figures: list[Figure]) -> None:
    scenario = write_scenario(tmp_path, models={"llama2-70b": {
        "max_batch": 9, "peak_batch": 8, "peak_tgs": 1400, "nodes": 8}})   # 10 OOMs on 8
    config = sim_config(tmp_path, scenario)
    await run(config, perf_spec(values=[6, 8, 10]))
    async with open_parts(config) as parts:
        png = await parts.service.plot(1)
        runs = await parts.store.runs.of_sweep(1)
        sweep = await parts.store.sweeps.get(1)
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    passed = sorted((_batch(r), r.tgs) for r in runs if r.outcome == "pass")
    failed = sorted(_batch(r) for r in runs if r.outcome in ("oom", "fail", "hang"))
    assert len(passed) >= 2 and failed, [(r.label, r.outcome) for r in runs]
    [fig] = figures
    [curve] = _lines(fig, "o")
    assert list(zip(curve.get_xdata(), curve.get_ydata(), strict=True)) == passed
    [crosses] = _lines(fig, "x")
    assert sorted(crosses.get_xdata()) == failed
    # The region that does not fit starts at the lowest failure above every success.
    [span] = fig.axes[0].patches   # axvspan: a Rectangle
    assert isinstance(span, Rectangle) and span.get_x() == min(failed)
    [star] = _lines(fig, "*")
    best = (sweep.verdict or {})["best"]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (best, dict(passed)[best])


async def test_no_plot_before_anything_ran(tmp_path: Path, figures: list[Figure]) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep = await parts.service.submit(perf_spec(values=[4]))
        assert await parts.service.plot(int(sweep["id"])) is None
    assert figures == []


async def test_model_sweep_node_perf_and_network_plots_draw_their_results(
        tmp_path: Path, figures: list[Figure]) -> None:
    scenario = write_scenario(tmp_path, commits={"cand": {"llama2-70b": {"tgs_factor": 0.9}}},
                              links=[{"a": "chi2832", "b": "chi2868", "factor": 0.85}])
    config = sim_config(tmp_path, scenario)
    four = "chi[2832,2863,2867-2868]"
    await run(config, {"kind": "model-sweep", "nodes": four, "commits": ["main", "cand"],
                       "matrix": {"llama2-70b": [1, 2]}})
    await run(config, {"kind": "node-perf", "nodes": four})
    await run(config, {"kind": "network", "nodes": four})
    async with open_parts(config) as parts:
        for sweep_id in (1, 2, 3):
            png = await parts.service.plot(sweep_id)
            assert png is not None and png.startswith(b"\x89PNG"), sweep_id
        runs = {i: await parts.store.runs.of_sweep(i) for i in (1, 2, 3)}
        node_perf = (await parts.store.sweeps.get(2)).verdict or {}
        network = (await parts.store.sweeps.get(3)).verdict or {}
    bars_sweep, bars_nodes, bars_network = figures

    # Model sweep: one bar series per commit, in the order of the keys (1N, 2N).
    heights = [b.get_height() for b in _bars(bars_sweep)]
    by_commit = {c: [r.tgs for r in runs[1] if r.params.commit == c] for c in ("main", "cand")}
    assert heights == [*by_commit["main"], *by_commit["cand"]]
    assert all(c < m for m, c in zip(by_commit["main"], by_commit["cand"], strict=True))

    # Node perf: a bar per node at its TGS, the median line at the verdict's median.
    assert [b.get_height() for b in _bars(bars_nodes)] == [r.tgs for r in runs[2]]
    medians = [ln for ln in bars_nodes.axes[0].get_lines() if ln.get_label().startswith("median")]
    assert [ln.get_ydata()[0] for ln in medians] == [node_perf["median"]]

    # Network: a bar per tested group, its share of the expected TGS, red when degraded.
    tests = network["tests"]
    bars = _bars(bars_network)   # barh draws the first group at the top: reversed y
    assert [b.get_width() for b in sorted(bars, key=lambda b: -b.get_y())] == pytest.approx(
        [100 * t["tgs"] / t["expected"] for t in tests])
    red = [t["nodes"] for t, b in zip(tests, sorted(bars, key=lambda b: -b.get_y()),
                                      strict=True) if b.get_facecolor() == to_rgba("#d1495b")]
    assert red == [t["nodes"] for t in tests if t["status"] == "DEGRADED"]
    assert red and "chi[2832,2868]" in red


async def test_xla_tuning_plot_draws_the_leaderboards_deltas_and_marks_the_winner(
        store: Store, tmp_path: Path, figures: list[Figure]) -> None:
    """A bar per profile of the primary config tag with a measured delta (not the evidence
    run, a diagnostic), at the report's leaderboard delta in %, best at the top, its
    whisker the delta's noise; the verdict's recipe marked (`*`, its own colour), no other
    bar. The second tag's runs and a profile that never ran are no bar."""
    spec = spec_of(config_tags={"sparse": {"sparse_matmul": "true"}, "dense": {}})
    rec = await recorder(store, tmp_path, spec)
    flag = ["--xla_gpu_enable_pipelined_all_gather=true"]
    for profile, tag, tgs, flags in [
            ("baseline", "sparse", [1000.0, 1004.0], []), ("evidence", "sparse", [990.0], []),
            ("fast", "sparse", [1080.0, 1086.0], flag), ("mild", "sparse", [1020.0, 1024.0], []),
            ("slow", "sparse", [980.0, 984.0], []), ("baseline", "dense", [900.0], []),
            ("fast", "dense", [1200.0], flag)]:
        for value in tgs:
            await rec.add((profile if tag == "sparse" else f"{profile}@dense",
                           params(profile, tag=tag, xla_flags=flags)), tgs=value)
    await rec.add(("typo", params("typo", tag="sparse")), klass="unknown_flag",
                  detail="xla_gpu_typo")
    await store.sweeps.transition(rec.sweep_id, "running", "started")
    await store.sweeps.transition(rec.sweep_id, "done", "verdict", verdict={
        "recipe": "mild", "reason": "a verdict naming a recipe other than the best bar",
        "rule": "stop.winner"})
    sweep = await store.sweeps.get(rec.sweep_id)
    runs, jobs = await store.runs.of_sweep(sweep.id), await store.jobs.of_sweep(sweep.id)
    png = kinds()["xla-tuning"].plot(sweep, runs, jobs)   # what `report --plot` serves
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    board = xla_report.report_json(sweep, runs, jobs)["leaderboard"]
    want = {r["profile"]: (100 * r["delta"], 100 * r["se"]) for r in board
            if r["tag"] == "sparse" and r["delta"] is not None and r["profile"] != "evidence"}
    assert sorted(want) == ["baseline", "fast", "mild", "slow"]

    [fig] = figures
    ax = fig.axes[0]
    bars = sorted(_bars(fig), key=lambda b: -b.get_y())   # top first
    labels = {round(float(t.get_position()[1])): t.get_text() for t in ax.get_yticklabels()}
    drawn = [(labels[round(b.get_y() + b.get_height() / 2)], b.get_width()) for b in bars]
    assert [label.removesuffix(" *") for label, _ in drawn] == sorted(
        want, key=lambda p: -want[p][0])                  # best at the top
    assert [w for _, w in drawn] == pytest.approx([want[p.removesuffix(" *")][0]
                                                   for p, _ in drawn])
    # Each whisker spans the bar's delta ± its noise.
    [errorbar] = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    [whiskers] = errorbar.lines[2]
    segments = whiskers.get_segments()
    spans = sorted(((float(seg[0][1]), float(seg[1][0] - seg[0][0]) / 2) for seg in segments),
                   key=lambda s: -s[0])
    assert [half for _, half in spans] == pytest.approx([want[label.removesuffix(" *")][1]
                                                         for label, _ in drawn])
    # The verdict's recipe, and it alone, is starred and gold.
    gold = to_rgba("#e0a800")
    assert [label for label, _ in drawn if label.endswith(" *")] == ["mild *"]
    assert [label for (label, _), b in zip(drawn, bars, strict=True)
            if b.get_facecolor() == gold] == ["mild *"]
