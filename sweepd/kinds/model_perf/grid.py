"""Two-parameter model perf search: the batch size with a second knob that leaves the
training itself unchanged (batch-sweep.SKILL.md "batch x mem_fraction: fix one and sweep
the other, document which combination won").

The second knob moves the largest batch that fits, so the two are searched together, one
memory-aware batch search (search.py) per value of the second knob, each starting from what
the others taught:

* `XLA_PYTHON_CLIENT_MEM_FRACTION` only sizes the pool XLA allocates from: the compiled
  program, and so its TGS and its compiled-memory line at a batch, is the same at every
  fraction. A batch that passed with a smaller pool passes with a larger one at the same
  TGS; one that failed with a larger pool fails with a smaller one. So every run counts at
  every fraction it says something about (the pool in its line scaled by the fraction), a
  larger fraction runs only the batches its larger pool newly admits, and only while the
  TGS trend at the smaller pool's top could still rise; a smaller fraction than one
  searched can admit no batch the larger did not, and is never run.
* `remat_policy` changes both what a step recomputes (its speed) and what it keeps (the
  temp slope): neither is known before a run. A later policy starts at the best batch so
  far; that one run measures its speed ratio and its own compiled-memory line, and the
  first policy's runs, their TGS scaled by that ratio and their memory lines dropped, stand
  in for the batches it has not run (SearchSpace.prior). A policy whose bound (its best,
  or what the TGS trend allows in its gaps) cannot beat the best of every setting by more
  than TOLERANCE stops there.

`max_target_length` and `quantization` change what is trained: they stay one-parameter
sweeps (spec.py refuses them here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweepd.kinds.model_perf.params import ENV_PREFIX
from sweepd.kinds.model_perf.search import (
    TOLERANCE,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    best,
    next_probe,
    upper_bound,
)

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
    """The run with the highest TGS over every setting, with its setting."""
    top = best([p for _, p in pairs])
    return next(((s, p) for s, p in pairs if p is top), None)


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
        if is_fraction(parameter) and float(s) < float(first):
            out.append((s, f"not run: a smaller pool than {first} runs the same compiled "
                           "program with fewer batches fitting, so it cannot be faster"))
            continue
        own = [p for t, p in pairs if t == s]
        if is_fraction(parameter):
            state = _fraction_step(space, first, s, pairs, runs_left)
        else:
            state = _remat_step(space, parameter, first, s, own, pairs, runs_left)
        out.append((s, state))
        if isinstance(state, PairStep) and not every:
            break
    return out


def _order(parameter: str, values: Sequence[Value]) -> list[Value]:
    """The config's value first; larger fractions upward (each admits more batches)."""
    if not is_fraction(parameter):
        return list(values)
    rest = sorted(values[1:], key=lambda v: float(v))
    return [values[0], *rest]


def _fraction_step(space: SearchSpace, first: Value, s: Value, pairs: Sequence[Pair],
                   runs_left: int | None) -> PairStep | str:
    seen = carried(s, pairs)
    step = next_probe(space, seen, runs_left)
    mine = sum(1 for t, _ in pairs if t == s)
    if step is None:
        return (f"settled with {mine} run{'s' * (mine != 1)} of its own: the runs at "
                "smaller pools (the same program) and the TGS trend leave no batch its "
                "pool admits that could be faster")
    return PairStep(s, step.value, step.why if s == first else
                    f"{step.why} (the runs at smaller pools count here: the same program)")


def carried(s: Value, pairs: Sequence[Pair]) -> list[Probe]:
    """Every run as it stands at fraction `s`: its own, a pass with a smaller or equal pool
    (it fits in more, at the same TGS), a failure with a larger or equal pool (it fails in
    less). The pool each printed is scaled to `s`."""
    f = float(s)
    out = []
    for t, p in pairs:
        ft = float(t)
        ok = p.outcome is Outcome.OK
        if t == s or (ok and ft <= f) or (not ok and p.outcome is not Outcome.SLOW and ft >= f):
            limit = p.limit_gb * f / ft if p.limit_gb is not None else None
            out.append(replace(p, limit_gb=limit))
    return out


def _remat_step(space: SearchSpace, parameter: str, first: Value, s: Value,
                own: list[Probe], pairs: Sequence[Pair], runs_left: int | None
                ) -> PairStep | str:
    if s == first:
        step = next_probe(space, own, runs_left)
        return PairStep(s, step.value, step.why) if step else \
            f"settled with {len(own)} runs: its batch search converged"
    ref = [replace(p, temp_gb=None, fixed_gb=None, limit_gb=None, alloc_gb=None)
           for t, p in pairs if t == first]
    top = best_pair(pairs)
    start = top[1].value if top is not None else None
    space_s = replace(space, prior=tuple(ref), start=start,
                      start_why=f"the best batch so far ({start}, at {parameter}="
                                f"{top[0] if top else first}): one run there measures this "
                                "policy's speed against it and its own memory line")
    if own and top is not None:
        bound = upper_bound(space_s, own)
        if bound <= (top[1].tgs or 0.0) * (1 + TOLERANCE):
            lead = "" if math.isinf(bound) else f" (at most {bound:,.0f} TGS)"
            return (f"settled with {len(own)} run{'s' * (len(own) != 1)}: scaled by its "
                    f"measured speed, {parameter}={first}'s curve and its own runs{lead} "
                    f"cannot beat the best ({top[1].tgs:,.0f} at {parameter}={top[0]}, "
                    f"batch {top[1].value}) by more than {TOLERANCE:.1%}")
    step = next_probe(space_s, own, runs_left)
    if step is None:
        return f"settled with {len(own)} runs: its batch search converged"
    return PairStep(s, step.value, step.why)
