"""The report block before the 8 h stop, ahead of what the leader still needs: when the runs
left hold the leader's needs or the runs its gain is reported from, not both, the block goes
first, so the timebox verdict's gain comes from runs that did not select the recipe (the
verdict then says what a deployment still needs). Where no block could run, the verdict says
its figure is the selecting runs' and how far such figures read above the truth on the bench
(`verdict_claim.SELECTING_OVERSTATE`)."""

from __future__ import annotations

import math

from sweepd.kinds.xla_tuning.evidence.board import Z_ONE, Board
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, REPORT
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.verdicts import leader
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.claims import report_due
from sweepd.kinds.xla_tuning.waves.planned import Planned


def runs_left(inp: Inputs, board: Board) -> int:
    """The runs that still start before the queue-time budget (or the spec's max_runs) is
    spent, at the mean queue time per run so far."""
    left = (math.ceil((inp.max_queue_s - board.queue_s) / board.per_run)
            if board.per_run > 0 else 10**6)
    if inp.max_runs is not None:
        left = min(left, inp.max_runs - board.runs)
    return max(0, left)


def block_first(inp: Inputs, board: Board, cands: Candidates, name: str | None, need: int,
                wave: int) -> tuple[Planned, ...] | None:
    """The report block of `name` (the recipe the verdict would name, else the leader), a
    recipe reading under the win bar (a below-the-bar proposal), when the runs left cannot
    hold both the `need` runs it still lacks and the block (and can
    hold the block)."""
    if (name is None or inp.report_runs <= 0 or board.per_run <= 0
            or (board.search_delta(name, inp.tags[0]) or 0.0) >= inp.win):
        return None  # a leader reading at the win bar: its confirmation may stop the sweep
    due, left = report_due(inp, board, name), runs_left(inp, board)
    if not due or left >= need + len(due) or left < len(due):
        return None  # both fit; or the block would not finish before the stop either
    table = {name: cands._profile(name), BASELINE: cands.table[BASELINE]}
    why = (f"{name} leads with {left} runs left before the "
           f"{inp.max_queue_s / 3600:g} h stop, too few for its {need} still needed runs and "
           f"its report block: the block first ({inp.report_runs} runs each of it and of the "
           "baseline, which decide nothing), so its gain is read on runs that did not "
           "select it")
    return tuple(Planned(table[p], inp.tags[0], wave + 1, REPORT, why) for p in due)


def leading(inp: Inputs, board: Board, cands: Candidates) -> str | None:
    """Without a recipe significant on its fresh runs, the leader where its runs together
    put it significantly above the bounded bar (one-sided 95 %): they kept it in front, so
    they do not name it, but its block may (issue 43: a +4.7 % stack read +4.0 % over four
    runs, one of them fresh, and the 8 h stop said "no change")."""
    lead = leader(inp, board, cands)
    if lead is None:
        return None
    t = inp.tags[0]
    d = board.search_delta(lead, t)
    return lead if d is not None and d - Z_ONE * board.search_se(lead, t) > inp.bounded_gain \
        else None
