"""The network sweep's chart: each tested group's TGS against what was expected."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.reports.plots import new_figure, png


def ratio_bars_plot(labels: Sequence[str], ratios: Sequence[float | None], limit: float,
                    title: str) -> bytes:
    """Each group's TGS as a share of what was expected, with the degraded threshold."""
    fig = new_figure(figsize=(7.0, max(3.0, 0.35 * len(labels) + 1.5)), dpi=100)
    ax = fig.add_subplot()
    ys = list(range(len(labels)))[::-1]
    colours = ["#6c757d" if r is None else "#d1495b" if r < 1 - limit else "#4c9a2a"
               for r in ratios]
    ax.barh(ys, [100 * (r or 0.0) for r in ratios], color=colours)
    ax.axvline(100 * (1 - limit), color="#d1495b", linestyle="--", linewidth=1,
               label=f"-{100 * limit:g}% (degraded)")
    ax.set_yticks(ys, list(labels), fontsize=7)
    ax.set_xlabel("% of expected TGS/device")
    ax.set_xlim(min([80.0, *(100 * r for r in ratios if r)]) - 2, 102)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return png(fig)
