"""Plot set-up shared by every kind's chart: PNG bytes from a matplotlib Figure (headless
Agg backend: the daemon has no display), the status colours. The charts are the kinds'
(`sweepd/kinds/<kind>/plot.py`)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

COLOURS = {"healthy": "#4c9a2a", "marginal": "#e0a800", "degraded": "#d1495b",
           "unhealthy": "#6c757d", "pending": "#adb5bd"}


def new_figure(**kwargs: Any) -> Figure:
    """A bare matplotlib Figure. matplotlib is imported here, on the first chart, not when a
    kind's module is: it is about 0.7 s of every daemon and CLI start otherwise."""
    import matplotlib
    from matplotlib.figure import Figure

    # A bare Figure draws through Agg already; set it anyway so no pyplot use elsewhere in
    # the process picks a GUI backend.
    matplotlib.use("Agg")
    return Figure(**kwargs)


def png(fig: Figure) -> bytes:
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def zoomed_axis(ax: Axes, low: float, high: float, label: str) -> None:
    """A y-axis that does not start at 0 (where the differences to be read are a few per
    cent of the bars), marked so: the label says where it starts and a break mark (//)
    sits at its foot, so a +5 % bar is not read as several times its neighbour."""
    ax.set_ylim(low, high)
    ax.set_ylabel(f"{label} (axis starts at {low:,.0f}, not 0)")
    kw: dict[str, Any] = {"transform": ax.transAxes, "color": "black", "clip_on": False,
                          "linewidth": 1}
    for dy in (0.0, 0.025):
        ax.plot((-0.02, 0.02), (dy - 0.01, dy + 0.01), **kw)
