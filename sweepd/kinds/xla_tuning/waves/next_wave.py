"""The next wave: every rule's candidates in the order search.py's docstring gives, each
profile and config tag once, at most wave_size runs."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.candidates_base import Item, best_recipe
from sweepd.kinds.xla_tuning.waves.family_gaps import beside_more_memory
from sweepd.kinds.xla_tuning.waves.on_leader import on_leader
from sweepd.kinds.xla_tuning.waves.surrogate_proposals import surrogate_items
from sweepd.kinds.xla_tuning.waves.tpe_proposals import tpe_items
from sweepd.kinds.xla_tuning.waves.wave_rules import closing


def wave_candidates(c: Candidates) -> list[Item]:
    """The next wave, at most wave_size runs, in search.py's order."""
    best = best_recipe(c)
    confirm = c.steps.confirmations()
    if confirm and closing(c.inp, c.board):  # the 8 h stop is a wave away: confirm what leads
        # first, after a rising family's next value when those re-runs cannot confirm it
        return dedup(c.steps.closing_firsts() + confirm)[: c.inp.wave_size]
    if c.inp.proposer == "tpe":  # Optuna's TPE explores; the seed's rules confirm and stop
        items = confirm + tpe_items(c, c.inp.wave_size - len(confirm))
    elif c.inp.proposer == "surrogate":  # the model's best upper bound explores; the same
        items = confirm + surrogate_items(c, c.inp.wave_size - len(confirm))
    else:
        items = (confirm + c.steps.refinements() + c.steps.stacks()
                 + on_leader(c, c.steps.seeds(focus_only=True)))
    items = items or c.steps.polish()  # the endgame, once the catalog's search has plateaued
    if not items and best is not None and c._d(best) >= c.inp.win:
        items = c.later.wave5(best) or c.later.wave6(best)
    # A leader whose search delta passed the bar but whose fresh runs did not confirm it is
    # no winner: with Waves 5 and 6 empty the other mechanisms come next, never a false
    # "catalog exhausted" with whole mechanisms untried.
    if not items:
        items = (on_leader(c, c.steps.seeds(focus_only=False)) or roomier_first(c)
                 or c.later.wave5(best) or (c.later.wave6(best) if best else []))
    if not items:
        items = c.fill.pairs()
    return dedup(items)[: c.inp.wave_size]


def dedup(items: list[Item]) -> list[Item]:
    """Each profile and config tag once, the first rule's reason kept."""
    seen: set[tuple[str, str]] = set()
    out: list[Item] = []
    for it in items:
        if (it[0].name, it[1]) not in seen:
            seen.add((it[0].name, it[1]))
            out.append(it)
    return out


def roomier_first(c: Candidates) -> list[Item]:
    """Each flag that ran out of memory alone, once beside the memory fraction, as soon as
    every mechanism has a first value: one run each, worth a whole recipe (pipelined
    all-gather +7 % beside mem .95), where the fills that came first ate the time at
    15-minute jobs (bounded in 100 of 100 sweeps). Off with `family_gaps`."""
    return beside_more_memory(c) if c.inp.family_gaps else []
