"""Before a "structurally bounded" verdict: is a recipe that reads above +2 % really not
above it? The bounded rule reads "none significantly above +2 %" on fresh runs (those that
did not select the recipe), and a recipe is confirmed on two of them, so a true +3.2 %
read +2.6 % on two fresh runs was "not significantly above" and the cell was called
bounded (red team: 40 % of sweeps on such a cell, 21 % on a +4.3 % one at 1.2 % noise).
"Not shown above" is not "shown below": the recipe reading highest above the bar runs again
beside the baseline until its fresh runs either clear the bar (no bounded verdict: the
sweep goes on, and the 8 h stop proposes it with its interval) or fall to it, up to
FRESH_N fresh runs against BOUNDED_BASE_N baseline runs (not the CONFIRM_BASE_N a
confirmation waits for). A bounded verdict also never rests on fewer than BASE_FLOOR
baseline runs: one high baseline run hides every gain behind it.
`thresholds.bounded_question: false` is the rule as before (measured in docs/benchmarks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, CLAIM
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.waves.claims import MIN_FRESH

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.waves.candidates import Candidates
    from sweepd.kinds.xla_tuning.waves.candidates_base import Item

FRESH_N = 6  # fresh runs of the recipe before "not shown above +2 %" is taken as it is
# Baseline runs beside them (at 0.8 % noise: se 0.46 %, a +3.2 % clears at ~80 %).
BOUNDED_BASE_N = 6
BASE_FLOOR = 3  # baseline runs below any bounded verdict


def reading(board: Board, name: str, tag: str) -> float:
    """The recipe's fresh delta, or its delta over every run before it has a fresh one."""
    fd = board.claim.delta(name, tag)
    return fd if fd is not None else (board.search_delta(name, tag) or 0.0)


def open_question(inp: Inputs, board: Board, cands: Candidates, fresh_only: bool = False
                  ) -> str | None:
    """The recipe reading highest above the bounded bar whose fresh runs neither clear it
    nor have fallen to it within FRESH_N runs; None: none is open. `fresh_only` (at the
    8 h stop): only a reading on fresh runs counts; one on its selecting runs alone is the
    winner's curse of the search (a flat cell's stack read +2.02 % on them)."""
    t = inp.tags[0]
    open_: list[tuple[float, str]] = []
    for e in cands._candidates():
        prof = cands._profile(e.profile)
        if len(prof.settings) > inp.max_flags or prof.keys & cands.unknown:
            continue
        fresh = len(board.claim.fresh(e.profile, t))
        if fresh >= FRESH_N or board.claim.above(e.profile, t, inp.bounded_gain):
            continue
        r = reading(board, e.profile, t)
        if fresh_only and not fresh and not _clear_of_selection(inp, board, e.profile, t):
            continue
        if r > inp.bounded_gain or (fresh < MIN_FRESH
                                    and (board.search_delta(e.profile, t) or 0.0)
                                    > inp.bounded_gain):
            open_.append((r, e.profile))
    return max(open_)[1] if open_ else None


def _clear_of_selection(inp: Inputs, board: Board, name: str, tag: str) -> bool:
    """A recipe with no fresh run whose runs read above the bar by more than two of their
    standard errors: more than picking the best of many could explain (a +6.7 % stack read
    twice, cut off by the stop before its claim runs)."""
    d = board.search_delta(name, tag)
    return d is not None and d - 2 * board.search_se(name, tag) > inp.bounded_gain


def before_bounded_question(inp: Inputs, board: Board, cands: Candidates,
                            floor: bool = True) -> list[Item]:
    """The runs a bounded verdict waits for first: the baseline to BASE_FLOOR (`floor`),
    then the open recipe (`open_question`) again, the baseline beside it up to
    BOUNDED_BASE_N."""
    if not inp.bounded_question:
        return []
    t = inp.tags[0]
    base = board.base(t)
    n_base = base.n if base is not None else 0
    if floor and n_base < BASE_FLOOR:
        return [(cands.table[BASELINE], t, rule_book.RERUN_BASELINE.id,
                 f"baseline n={n_base}: a bounded verdict reads every delta against its mean")]
    name = open_question(inp, board, cands)
    if name is None:
        return []
    why = (f"{said(board, name, t)}, above the +{inp.bounded_gain:.0%} bar but not "
           "significantly: measured again before the cell is called bounded")
    out: list[Item] = []
    if n_base < BOUNDED_BASE_N:
        out.append((cands.table[BASELINE], t, rule_book.RERUN_BASELINE.id,
                    f"baseline n={n_base}: {why}"))
    out.append((cands._profile(name), t, CLAIM, why))  # a claim run: its runs are fresh
    return out


def open_note(inp: Inputs, board: Board, cands: Candidates) -> str:
    """What a "no change" verdict leaves open: the recipe reading above the bar whose runs
    could not say (the stop came first), with its reading and interval."""
    name = open_question(inp, board, cands, fresh_only=True) if inp.bounded_question else None
    if name is None:
        return ""
    return (f"; not shown either way: {said(board, name, inp.tags[0])}, above "
            f"+{inp.bounded_gain:.0%} but not significantly")


def said(board: Board, name: str, tag: str) -> str:
    """The recipe's reading as measured: on its fresh runs with their interval, or, with
    none yet, over all its runs, the one that selected it among them."""
    fresh = len(board.claim.fresh(name, tag))
    if not fresh:
        e = board.get(name, tag)
        n = e.n if e is not None else 0
        return (f"{name} reads {reading(board, name, tag):+.2%} over its {n} run(s), the one "
                "that selected it among them")
    span = board.claim.interval(name, tag)
    where = (f" (95 % interval {span[0]:+.2%} to {span[1]:+.2%})" if span is not None
             else "")
    return (f"{name} reads {reading(board, name, tag):+.2%} on {fresh} run(s) that did not "
            f"select it{where}")
