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
    pick = min((top, rival), key=lambda v: (len(runs[v]), -mean[v]))
    tries = sum(p.value == pick and not p.earlier for p in probes)  # a failed one counts
    if tries >= MAX_RUNS_OF_A_VALUE:
        return None
    noise = f"{space.noise:.1%}"
    return Step(pick, f"{top} and {rival} measured {mean[rival] / mean[top] - 1:+.1%} apart, "
                      f"within two runs' noise: the runs' steps put the run-to-run noise at "
                      f"{noise} (the rules assume {NOISE:.0%}), so {pick} runs again and "
                      "the verdict rests on the means")
