"""The campaign's chart: TGS/device per stage, each with its 95 % interval where its runs
give one (the confirm stage's arms; the flags stage's gain over its baseline)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import TYPE_CHECKING

from sweepd.reports.plots import new_figure, png

if TYPE_CHECKING:
    from matplotlib.figure import Figure  # imported on the first chart (reports/plots.py)


@dataclass(frozen=True)
class Bar:
    label: str
    tgs: float
    interval: tuple[float, float] | None

    @classmethod
    def of(cls, label: str, values: Sequence[float]) -> Bar:
        """A mean with its 95 % interval (t, 2 degrees of freedom or more: wide)."""
        mean = fmean(values)
        if len(values) < 2:
            return cls(label, mean, None)
        from sweepd.kinds.campaign.confirm import t95
        half = t95(len(values) - 1) * stdev(values) / math.sqrt(len(values))
        return cls(label, mean, (mean - half, mean + half))


def stage_plot(bars: Sequence[Bar], title: str) -> bytes:
    return png(stage_figure(bars, title))


def stage_figure(bars: Sequence[Bar], title: str) -> Figure:
    """A bar per stage at its TGS/device, its 95 % interval as the error bar (none where
    its runs give none)."""
    fig = new_figure(figsize=(max(6.0, 1.6 * len(bars) + 2), 4.0), dpi=100)
    ax = fig.add_subplot()
    names = [b.label for b in bars]
    values = [b.tgs for b in bars]
    low = [b.tgs - b.interval[0] if b.interval else 0.0 for b in bars]
    high = [b.interval[1] - b.tgs if b.interval else 0.0 for b in bars]
    ax.bar(names, values, yerr=[low, high], capsize=6, color="#4c9a2a", alpha=0.8)
    # From 0: a bar's height is its TGS, so +11 % looks like +11 % (from the lowest bar's
    # 95 % it looked six times larger).
    ax.set_ylim(0, max(b.interval[1] if b.interval else b.tgs for b in bars) * 1.05)
    ax.set_ylabel("TGS/device")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=20)
    return fig
