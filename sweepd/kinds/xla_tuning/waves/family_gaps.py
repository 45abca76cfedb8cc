"""Before a "structurally bounded" verdict: the catalog's untried first values and the
untried values of its numeric families, in the queue time the sweep would leave unused.

The search walks a numeric family along its local slope from the value first tried, so a
value that helps on its own between flat or falling neighbours (or at an end the slope
leads away from) is never run, and the cell is called bounded with the gain unseen (red
team: a combine threshold worth +3.5-8 % alone at an interior value, found in 36 % of
cells). The bounded verdict is a claim about the whole editable scope; the SKILL.md's
rule (>= 25 profiles, none above +2 %) ends the sweep well inside 8 h, so the time left
goes to those values first: the evidence's mechanisms in order, in each family the value
farthest from any value run (a bisection of the widest gap). A catalog spent short of the
25 profiles also takes the first mechanism's gaps, after the ends of flat families and
the pairs of the fastest singles (`Candidates.pairs`). What does not fit before the
8 h stop is named in the verdict ("family values not run"), and the bounded rule still
fires inside 8 h.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.flags import MEM_FRACTION
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import Fate
from sweepd.kinds.xla_tuning.inputs import Inputs

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.waves.candidates import Candidates
    from sweepd.kinds.xla_tuning.waves.candidates_base import Item

# What these runs set off (a contender's re-run, a stack of two near-noise singles) runs
# after them: with fewer spare, 1-2 of 10 flat FSDP=8 cells ended on the timebox.
SPARE_RUNS = 4
ROOMIER = rule_book.OOM_BESIDE_MEMORY.id  # the rule of a run beside more memory


def before_bounded(inp: Inputs, board: Board, cands: Candidates) -> list[Item]:
    """The runs a bounded verdict waits for, cut to what ends before the 8 h stop with
    SPARE_RUNS to spare (so the verdict is still the bounded rule's, not the timebox's):
    first values of mechanisms never seeded, then family values."""
    if not inp.family_gaps:
        return []
    left = left_to_run(cands)
    # A flag that ran out of memory alone, beside the memory fraction: one run each, worth
    # a whole recipe, taken while any run still fits before the stop (at 15-minute jobs
    # the spare runs kept left it out of every sweep).
    roomier = bool(left) and left[0][2] == ROOMIER
    fit = _fit(inp, board) + (SPARE_RUNS if roomier else 0)
    return left[:min(fit, inp.wave_size)] if fit > 0 else []


def left_to_run(cands: Candidates) -> list[Item]:
    """What of the catalog a bounded verdict would leave unrun, in the order it is run."""
    return (cands.steps.seeds(focus_only=False) or beside_more_memory(cands)
            or cands.fill.untried_values(len(cands.order)))


def beside_more_memory(cands: Candidates) -> list[Item]:
    """Each single that ran out of memory alone, once on top of the memory-fraction profile
    (when that ran and fit): the SKILL.md never re-runs an OOM as it was ("same flags =
    same OOM"), but with more of the HBM the same flag may fit (red team: pipelined
    all-gather +7 % beside mem .95, bounded in 60 of 60 seeds without it)."""
    t = cands.primary
    roomier = [p for p in cands.inp.catalog if any(s.key == MEM_FRACTION for s in p.settings)]
    out: list[Item] = []
    for mem in roomier:
        e = cands.board.get(mem.name, t)
        if e is None or not e.n:
            continue
        for p in cands.inp.catalog:
            oom = cands.board.get(p.name, t)
            if oom is None or oom.fate is not Fate.OOM or p.keys & mem.keys:
                continue
            if len(p.settings) + len(mem.settings) > cands.inp.max_flags:
                continue
            s = cands._profile("+".join(sorted([p.name, mem.name])))
            if cands._ok(s):
                out.append((s, t, ROOMIER,
                            f"{p.name} ran out of memory alone ({oom.detail or 'OOM'}); "
                            f"{mem.name} gives XLA more of the HBM: {s.name} once"))
    return out


def _fit(inp: Inputs, board: Board) -> int:
    if board.per_run <= 0:
        return inp.wave_size
    return math.floor((inp.max_queue_s - board.queue_s) / board.per_run) - SPARE_RUNS


def bounded_note(inp: Inputs, cands: Candidates) -> str:
    """Which bounded rule applied, said from what is left unrun: the SKILL.md's as it
    comes, or with the catalog's unrun values run first while the time held them."""
    if not inp.family_gaps:
        return " (the SKILL.md's rule as it comes: family_gaps off)"
    if left_to_run(cands):
        return (f" (family_gaps: the queue time before the 8 h stop, less {SPARE_RUNS} spare "
                "runs, did not hold every value the search left unrun: what is left is "
                "named below)")
    return " (family_gaps: every value of the catalog run)"
