"""The model perf sweep's chart: TGS against the swept value, the OOM region, the optimum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sweepd.reports.plots import new_figure, png

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def perf_curve_plot(points: Sequence[tuple[float, float]], failed: Sequence[float],
                    best: float | None, parameter: str, title: str) -> bytes:
    return png(perf_curve_figure(points, failed, best, parameter, title))


def perf_curve_figure(points: Sequence[tuple[float, float]], failed: Sequence[float],
                      best: float | None, parameter: str, title: str) -> Figure:
    """Steady TGS against the swept value: the measured curve, the values that OOMed or
    failed (shaded from the lowest one above every success: the region that does not fit),
    the best measured (not called an optimum: the search may stop on a best so far)."""
    fig = new_figure(figsize=(7.0, 4.6), dpi=100)
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
            ax.plot([best], [y], "*", color="#e0a800", markersize=16,
                    label=f"best measured {best:g}")
    ax.set_xlabel(parameter)
    ax.set_ylabel("TGS/device")
    ax.set_ylim(0, top * 1.12)
    ax.set_title(title)
    # Below the axes, not in them: the failed markers sit on the x axis, at the right end
    # where the OOMs are, exactly where a "lower right" legend covered them.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8,
              frameon=False)
    return fig


def perf_grid_plot(curves: Mapping[str, Sequence[tuple[float, float]]],
                   failed: Mapping[str, Sequence[float]], win: tuple[float, str] | None,
                   parameter: str, second: str, title: str) -> bytes:
    return png(perf_grid_figure(curves, failed, win, parameter, second, title))


def perf_grid_figure(curves: Mapping[str, Sequence[tuple[float, float]]],
                     failed: Mapping[str, Sequence[float]], win: tuple[float, str] | None,
                     parameter: str, second: str, title: str) -> Figure:
    """A two-parameter sweep: TGS against the batch, one curve per value of the second
    knob, its failures marked on the axis in the curve's colour, the winner starred."""
    fig = new_figure(figsize=(7.0, 4.6), dpi=100)
    ax = fig.add_subplot()
    top = max((y for pts in curves.values() for _, y in pts), default=1.0)
    for k, (value, pts) in enumerate(curves.items()):
        colour = f"C{k}"
        line = sorted(pts)
        ax.plot([x for x, _ in line], [y for _, y in line], "o-", color=colour,
                label=f"{second}={value}")
        if failed.get(value):
            ax.plot(list(failed[value]), [0.02 * top] * len(failed[value]), "x",
                    color=colour, markersize=9)
        if win is not None and win[1] == value:
            y = dict(line).get(win[0])
            if y is not None:
                ax.plot([win[0]], [y], "*", color="#e0a800", markersize=16,
                        label=f"winner: {parameter}={win[0]:g}, {second}={value}")
    ax.set_xlabel(parameter)
    ax.set_ylabel("TGS/device (x: OOM or failed)")
    ax.set_ylim(0, top * 1.12)
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8,
              frameon=False)
    return fig
