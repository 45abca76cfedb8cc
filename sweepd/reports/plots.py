"""Report plots as PNG bytes (matplotlib, headless Agg backend: the daemon has no display)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from sweepd.kinds.node_perf.plan import DEGRADED_BAND, HEALTHY_BAND

# A bare Figure draws through Agg already; set it anyway so no pyplot use elsewhere in the
# process picks a GUI backend.
matplotlib.use("Agg")

_COLOURS = {"healthy": "#4c9a2a", "marginal": "#e0a800", "degraded": "#d1495b",
            "unhealthy": "#6c757d", "pending": "#adb5bd"}


def node_perf_plot(nodes: Sequence[tuple[str, float | None, str]], median: float | None,
                   title: str = "TGS/device per node") -> bytes:
    """Bars of TGS per node (node, tgs or None, status), the median and the ±2% / -5% bands."""
    fig = Figure(figsize=(max(6.0, 0.6 * len(nodes) + 2), 4.0), dpi=100)
    ax = fig.add_subplot()
    names = [n for n, _, _ in nodes]
    values = [t or 0.0 for _, t, _ in nodes]
    ax.bar(names, values, color=[_COLOURS.get(s, "#adb5bd") for _, _, s in nodes])
    if median:
        ax.axhspan(median * (1 + HEALTHY_BAND), median * (1 - HEALTHY_BAND), color="#4c9a2a",
                   alpha=0.12, label="±2% (healthy)")
        ax.axhline(median, color="black", linewidth=1, label=f"median {median:,.0f}")
        ax.axhline(median * (1 + DEGRADED_BAND), color="#d1495b", linestyle="--", linewidth=1,
                   label="-5% (degraded)")
        low = min([median * 0.9, *[v for v in values if v > 0]])
        ax.set_ylim(low * 0.97, max([median * 1.04, *values]) * 1.01)
    for i, (_, tgs, status) in enumerate(nodes):
        if tgs is None:
            ax.annotate(status, (i, 0), xytext=(0, 4), textcoords="offset points",
                        ha="center", rotation=90, fontsize=8)
    ax.set_ylabel("TGS/device")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def _png(fig: Figure) -> bytes:
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def perf_curve_plot(points: Sequence[tuple[float, float]], failed: Sequence[float],
                    best: float | None, parameter: str, title: str) -> bytes:
    """Steady TGS against the swept value: the measured curve, the values that OOMed or
    failed (shaded from the lowest one above every success: the region that does not fit),
    the optimum."""
    fig = Figure(figsize=(7.0, 4.0), dpi=100)
    ax = fig.add_subplot()
    pts = sorted(points)
    if pts:
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", color="#1f77b4",
                label="steady TGS/device (steps 5-14)")
    top = max([y for _, y in pts], default=1.0)
    # Shade only above every value that ran: a failure below one (a hang, a broken node) is
    # marked, but does not make the values above it "not fit".
    cliff = [f for f in failed if all(f > x for x, _ in pts)]
    if cliff:
        edge = min(cliff)
        right = max([*failed, *(x for x, _ in pts)]) * 1.05 + 1
        ax.axvspan(edge, right, color="#d1495b", alpha=0.12, label=f"OOM / failed from {edge:g}")
    if failed:
        ax.plot(list(failed), [0.02 * top] * len(failed), "x", color="#d1495b", markersize=9,
                label="failed")
    if best is not None:
        y = dict(pts).get(best)
        if y is not None:
            ax.plot([best], [y], "*", color="#e0a800", markersize=16, label=f"optimum {best:g}")
    ax.set_xlabel(parameter)
    ax.set_ylabel("TGS/device")
    ax.set_ylim(0, top * 1.12)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def grouped_bars_plot(groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
                      title: str, ylabel: str = "TGS/device") -> bytes:
    """Bars per group (e.g. model x node count), one bar per series (e.g. commit); a missing
    value (failed) is drawn as an empty slot marked x."""
    fig = Figure(figsize=(max(6.0, 0.9 * len(groups) + 2), 4.2), dpi=100)
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
    return _png(fig)


def ratio_bars_plot(labels: Sequence[str], ratios: Sequence[float | None], limit: float,
                    title: str) -> bytes:
    """Each group's TGS as a share of what was expected, with the degraded threshold."""
    fig = Figure(figsize=(7.0, max(3.0, 0.35 * len(labels) + 1.5)), dpi=100)
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
    return _png(fig)
