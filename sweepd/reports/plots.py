"""Plot set-up shared by every kind's chart: PNG bytes from a matplotlib Figure (headless
Agg backend: the daemon has no display), the status colours. The charts are the kinds'
(`sweepd/kinds/<kind>/plot.py`)."""

from __future__ import annotations

import io

import matplotlib
from matplotlib.figure import Figure

# A bare Figure draws through Agg already; set it anyway so no pyplot use elsewhere in the
# process picks a GUI backend.
matplotlib.use("Agg")

COLOURS = {"healthy": "#4c9a2a", "marginal": "#e0a800", "degraded": "#d1495b",
           "unhealthy": "#6c757d", "pending": "#adb5bd"}


def png(fig: Figure) -> bytes:
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
