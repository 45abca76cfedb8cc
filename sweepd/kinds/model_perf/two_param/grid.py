"""Two-parameter model perf search: the batch size with a second knob that leaves the
training itself unchanged (batch-sweep.SKILL.md "batch x mem_fraction: fix one and sweep
the other, document which combination won"). This module picks the setting to run next.

The second knob moves the largest batch that fits, so the two are searched together, one
memory-aware batch search (the search package) per value of the second knob, each starting
from what the others taught, in order: the config's value first, then larger fractions
upward (each admits more batches) or the other remat policies as given. Each setting's own
step is its knob's: `fraction_step` (a fraction's runs count at every pool they say
something about, larger pools run only the batches they newly admit), `fraction_below` (a
smaller fraction than the config's admits no batch the larger did not; it runs once where
the larger pool is above 0.95 and may starve the collectives, and is otherwise taken as no
faster) or `remat_step` (a later policy bounded by its measured speed, read by
`remat_speed`, times the first policy's curve up to its own largest fit). The terms they
share (the knobs, a pair, the best pair) are in `pairs`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.model_perf.search import SearchSpace, Value
from sweepd.kinds.model_perf.two_param.fraction_below import below_step
from sweepd.kinds.model_perf.two_param.fraction_step import fraction_step
from sweepd.kinds.model_perf.two_param.pairs import Pair, PairStep, is_fraction
from sweepd.kinds.model_perf.two_param.remat_step import remat_step


def next_pair(space: SearchSpace, parameter: str, values: Sequence[Value],
              pairs: Sequence[Pair], runs_left: int | None = None) -> PairStep | None:
    """The next (second value, batch) to run and why, or None when every setting is
    settled. `space` is the batch space of the first value (the config's setting)."""
    for _, state in _settings(space, parameter, values, pairs, runs_left):
        if isinstance(state, PairStep):
            return state
    return None


def settled_notes(space: SearchSpace, parameter: str, values: Sequence[Value],
                  pairs: Sequence[Pair]) -> dict[Value, str]:
    """For each setting the search is done with: why (shown in the verdict)."""
    return {s: why for s, why in _settings(space, parameter, values, pairs, None, every=True)
            if isinstance(why, str)}


def _settings(space: SearchSpace, parameter: str, values: Sequence[Value],
              pairs: Sequence[Pair], runs_left: int | None, every: bool = False
              ) -> list[tuple[Value, PairStep | str]]:
    """Each setting in search order with its next step, or why it needs none. Stops at
    the first step unless `every`."""
    out: list[tuple[Value, PairStep | str]] = []
    first = values[0]
    order = _order(parameter, values)
    for s in order:
        own = [p for t, p in pairs if t == s]
        state: PairStep | str
        if is_fraction(parameter) and float(s) < float(first):
            state = below_step(space, first, s, values, pairs, runs_left)
        elif is_fraction(parameter):
            state = fraction_step(space, first, s, pairs, runs_left)
        else:
            state = remat_step(space, parameter, first, s, own, pairs, runs_left)
        out.append((s, state))
        if isinstance(state, PairStep) and not every:
            break
    return out


def _order(parameter: str, values: Sequence[Value]) -> list[Value]:
    """The config's value first; larger fractions upward (each admits more batches), then
    the smaller ones downward (each read, if at all, at the best batch of the others)."""
    if not is_fraction(parameter):
        return list(values)
    first = float(values[0])
    up = sorted((v for v in values[1:] if float(v) > first), key=float)
    down = sorted((v for v in values[1:] if float(v) < first), key=float, reverse=True)
    return [values[0], *up, *down]
