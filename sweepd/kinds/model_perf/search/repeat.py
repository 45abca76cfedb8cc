"""Runs made again where the noise is larger than the rules assume: the best and its
closest rival measured within two runs' noise of each other are each run again (up to
MAX_RUNS_OF_A_VALUE), so the verdict rests on their means. Only where the runs' own steps
show a noise above NOISE (`SearchSpace.noise`); at the default noise one run a value is the
SKILL.md's procedure and what the rules are built on."""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.model_perf.search.space import NOISE, Probe, SearchSpace, Step, mean_tgs, means

MAX_RUNS_OF_A_VALUE = 2


def repeat_top(space: SearchSpace, probes: Sequence[Probe], runs_left: int | None) -> Step | None:
    """Once the search has settled: the best or its rival (the one with fewer runs, the
    faster on a tie) run again, while the two measured within two runs' noise."""
    if space.noise <= NOISE or not space.ordered or (runs_left is not None and runs_left < 1):
        return None
    runs = {v: ps for v, ps in means([p for p in probes if not p.earlier]).items()
            if v in space.candidates}
    mean = {v: mean_tgs(ps) for v, ps in runs.items()}
    if len(mean) < 2:
        return None
    top = max(mean, key=lambda v: mean[v])
    rivals = [v for v in mean if v != top and mean[v] >= (1 - space.flat) * mean[top]]
    if not rivals:
        return None
    rival = max(rivals, key=lambda v: mean[v])
    # A failed run counts toward a value's runs; one of the two out of runs that way (a
    # one-off OOM at the best) leaves the other to run again, not the tie unbroken (a
    # rival 4 % low by noise was never re-run and the verdict missed the peak by 5.6 %).
    tries = {v: sum(p.value == v and not p.earlier for p in probes) for v in (top, rival)}
    left = [v for v in (top, rival) if tries[v] < MAX_RUNS_OF_A_VALUE]
    if not left:
        return None
    pick = min(left, key=lambda v: (len(runs[v]), -mean[v]))
    noise = f"{space.noise:.1%}"
    return Step(pick, f"{top} and {rival} measured {mean[rival] / mean[top] - 1:+.1%} apart, "
                      f"within two runs' noise: the runs' steps put the run-to-run noise at "
                      f"{noise} (the rules assume {NOISE:.0%}), so {pick} runs again and "
                      "the verdict rests on the means")
