"""Plot set-up shared by every kind's chart: PNG bytes from a matplotlib Figure (headless
Agg backend: the daemon has no display), the status colours. The charts are the kinds'
(`sweepd/kinds/<kind>/plot.py`).

`as_svg()` makes every chart drawn inside it SVG text instead (the HTML page inlines it):
a context variable rather than a parameter, so that no kind's `plot` hook changes shape and
every kind draws its one chart for both."""

from __future__ import annotations

import contextlib
import contextvars
import io
import re
from collections.abc import Iterator
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


_SVG: contextvars.ContextVar[bool] = contextvars.ContextVar("sweepd_svg", default=False)


@contextlib.contextmanager
def as_svg() -> Iterator[None]:
    """Charts drawn inside are SVG (UTF-8 bytes of an `<svg>` element, ready to inline)."""
    token = _SVG.set(True)
    try:
        yield
    finally:
        _SVG.reset(token)


def png(fig: Figure) -> bytes:
    """The chart as PNG bytes; inside `as_svg()`, as an inline `<svg>` element."""
    fig.tight_layout()
    out = io.BytesIO()
    if not _SVG.get():
        fig.savefig(out, format="png")
        return out.getvalue()
    import matplotlib

    # Text as paths (no font to load), ids salted alike (the same chart, the same bytes).
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "sweepd"}):
        fig.savefig(out, format="svg", metadata={"Date": None})
    return inline_svg(out.getvalue().decode("utf-8")).encode("utf-8")


def inline_svg(text: str) -> str:
    """An SVG document as an element for an HTML page: without its XML prolog, its DOCTYPE
    (which names a DTD by URL) and its RDF metadata (URLs too); a page that opens with the
    network off must name nothing to fetch."""
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S).strip()


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
