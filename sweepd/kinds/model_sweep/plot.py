"""The model sweep's chart: TGS per model x node count, one bar per commit."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.reports.plots import new_figure, png


def grouped_bars_plot(groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
                      title: str, ylabel: str = "TGS/device") -> bytes:
    """Bars per group (e.g. model x node count), one bar per series (e.g. commit); a missing
    value (failed) is drawn as an empty slot marked x."""
    fig = new_figure(figsize=(max(6.0, 0.9 * len(groups) + 2), 4.2), dpi=100)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=name)
        for x, v in zip(xs, values, strict=True):
            if v is None:
                ax.plot([x], [0], "x", color="#d1495b", markersize=9)
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], list(groups))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return png(fig)
