"""The two-parameter sweep's terms: the second knobs it takes (and the ones it refuses), a
(setting, run) pair, the step its search asks for, and the best pair so far.

`max_target_length` and `quantization` change what is trained: they stay one-parameter
sweeps (spec.py refuses them here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweepd.kinds.model_perf.params import ENV_PREFIX
from sweepd.kinds.model_perf.search import Probe, Value, best_mean

FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
REMAT = "remat_policy"
SECOND = (f"{ENV_PREFIX}{FRACTION}", REMAT)  # the knobs a two-parameter sweep takes
# Knobs that change what is trained, with the one line that refuses them.
ONE_PARAMETER = ("max_target_length", "quantization")

Pair = tuple[Value, Probe]  # (the second knob's value, the run at a batch)


@dataclass(frozen=True)
class PairStep:
    second: Value
    value: Value
    why: str


def is_fraction(parameter: str) -> bool:
    return parameter.removeprefix(ENV_PREFIX) == FRACTION


def best_pair(pairs: Sequence[Pair]) -> Pair | None:
    """The (setting, value) whose runs have the highest mean TGS over every setting (a
    value is run again only where the noise exceeds the rules': `search.repeat`), as its
    latest run with that mean; the earliest on a tie."""
    by: dict[Value, list[Probe]] = {}
    for s, p in pairs:
        by.setdefault(s, []).append(p)
    tops = [(s, top) for s, ps in by.items() if (top := best_mean(ps)) is not None]
    return max(tops, key=lambda st: st[1].tgs or 0.0, default=None)
