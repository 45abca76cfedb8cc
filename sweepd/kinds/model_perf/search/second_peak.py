"""The verdict's note where the runs leave room for a second peak below the best: the
search assumes one peak (SKILL.md's narrowing), and runs concave within the noise cannot
show a valley between them. Said unless the spec's `multi_peak` ran those gaps."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.model_perf.search.shapes import valley_gaps
from sweepd.kinds.model_perf.search.space import LADDER_VALLEY, Probe, SearchSpace
from sweepd.kinds.model_perf.search.view import View


def second_peak_room(space: SearchSpace, probes: Sequence[Probe]) -> str | None:
    """The gaps below the best that a valley LADDER_VALLEY deep between runs would open
    (`shapes.valley_gaps`), named, with the option that runs them; None where there is
    none, off a batch axis, or where `multi_peak` was on (it ran them, or the budget's own
    note says what was left)."""
    if not space.ordered or not space.work_grows or space.multi_peak:
        return None
    view = View.with_prior(space, probes)
    gaps = valley_gaps(view)
    if not gaps:
        return None
    best_i = view.best_index
    spans = [f"{view.name(lo + 1)}..{view.name(hi - 1)}" for lo, hi in sorted(gaps)]
    named = spans[0] if len(spans) == 1 else f"{', '.join(spans[:-1])} and {spans[-1]}"
    return (f"one peak assumed: {named} below the best ({view.name(best_i)}) "
            f"did not run, and a second peak there past a valley up to {LADDER_VALLEY:.0%} "
            "deep would not show in the runs (the spec's multi_peak runs them)")
