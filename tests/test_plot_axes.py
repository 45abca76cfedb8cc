"""Bars are read by their height: the campaign's stages start at 0 (from the lowest bar's
interval, +11 % looked six times larger), and node perf's axis, zoomed to its few-per-cent
bands, says where it starts and carries a break mark."""

from __future__ import annotations

from sweepd.kinds.campaign.plot import Bar, stage_figure
from sweepd.kinds.node_perf.plot import node_perf_figure
from tests.golden_files import GOLDEN, check_golden


def test_the_campaign_bars_start_at_zero() -> None:
    fig = stage_figure([Bar("batch", 1000.0, None), Bar("confirm", 1110.0, (1090.0, 1130.0))],
                       "campaign")
    low, high = fig.axes[0].get_ylim()
    assert low == 0 and high >= 1130


def test_node_perfs_zoomed_axis_is_marked() -> None:
    fig = node_perf_figure([("n1", 1000.0, "healthy"), ("n2", 940.0, "degraded")], 1000.0)
    ax = fig.axes[0]
    low, _ = ax.get_ylim()
    assert low > 0
    assert f" {low:,.0f}," in ax.get_ylabel()   # the label says where the axis starts
    check_golden(GOLDEN / "plot_axes" / "node_perf_ylabel.txt", f"{ax.get_ylabel()}\n")
    assert len(ax.lines) >= 2 + 2   # the median and the -5 % line, and the break mark
