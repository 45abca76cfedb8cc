"""The tuning leaderboard as a picture: Δ% vs baseline-deployed per profile, each bar with
its noise whisker (the delta's standard error), the winner marked *."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.reports.plots import new_figure, png


def delta_bars(bars: Sequence[tuple[str, float, float]], winner: str | None,
               title: str) -> bytes:
    """`bars`: (profile, delta, standard error), fractions; drawn best first."""
    ranked = sorted(bars, key=lambda b: -b[1])
    fig = new_figure(figsize=(7.0, max(2.5, 0.28 * len(ranked) + 1.2)), dpi=100)
    ax = fig.add_subplot()
    ys = list(range(len(ranked)))[::-1]
    colours = ["#e0a800" if p == winner else ("#2a9d8f" if d >= 0 else "#d1495b")
               for p, d, _ in ranked]
    ax.barh(ys, [100 * d for _, d, _ in ranked], xerr=[100 * s for _, _, s in ranked],
            color=colours, capsize=3, ecolor="#333333")
    ax.set_yticks(ys, [f"{p} *" if p == winner else p for p, _, _ in ranked], fontsize=7)
    ax.axvline(0, color="#333333", linewidth=0.8)
    ax.set_xlabel("Δ% steady TGS vs baseline-deployed (whisker: ± noise)")
    ax.set_title(title)
    return png(fig)
