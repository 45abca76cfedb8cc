"""The node perf sweep's chart: TGS per node against the median and its bands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sweepd.kinds.node_perf.plan import DEGRADED_BAND, HEALTHY_BAND
from sweepd.reports.plots import COLOURS, new_figure, png, zoomed_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure  # imported on the first chart (reports/plots.py)


def node_perf_plot(nodes: Sequence[tuple[str, float | None, str]], median: float | None,
                   title: str = "TGS/device per node") -> bytes:
    return png(node_perf_figure(nodes, median, title))


def node_perf_figure(nodes: Sequence[tuple[str, float | None, str]], median: float | None,
                     title: str = "TGS/device per node") -> Figure:
    """Bars of TGS per node (node, tgs or None, status), the median and the ±2% / -5% bands.
    The bands are a few per cent wide: the axis is zoomed to them, and marked so."""
    fig = new_figure(figsize=(max(6.0, 0.6 * len(nodes) + 2), 4.0), dpi=100)
    ax = fig.add_subplot()
    names = [n for n, _, _ in nodes]
    values = [t or 0.0 for _, t, _ in nodes]
    ax.bar(names, values, color=[COLOURS.get(s, "#adb5bd") for _, _, s in nodes])
    if median:
        ax.axhspan(median * (1 + HEALTHY_BAND), median * (1 - HEALTHY_BAND), color="#4c9a2a",
                   alpha=0.12, label="±2% (healthy)")
        ax.axhline(median, color="black", linewidth=1, label=f"median {median:,.0f}")
        ax.axhline(median * (1 + DEGRADED_BAND), color="#d1495b", linestyle="--", linewidth=1,
                   label="-5% (degraded)")
        low = min([median * 0.9, *[v for v in values if v > 0]])
        zoomed_axis(ax, low * 0.97, max([median * 1.04, *values]) * 1.01, "TGS/device")
    else:
        ax.set_ylabel("TGS/device")
    for i, (_, tgs, status) in enumerate(nodes):
        if tgs is None:
            ax.annotate(status, (i, 0), xytext=(0, 4), textcoords="offset points",
                        ha="center", rotation=90, fontsize=8)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(loc="lower right", fontsize=8)
    return fig
