"""The report block before the 8 h stop, ahead of what the leader still needs: when the runs
left hold the leader's needs or the runs its gain is reported from, not both, the block goes
first, so the timebox verdict's gain comes from runs that did not select the recipe (the
verdict then says what a deployment still needs). Where no block could run, the verdict says
its figure is the selecting runs' and how far such figures read above the truth on the bench
(`SELECTING_OVERSTATE`)."""

from __future__ import annotations

import math

from sweepd.kinds.xla_tuning.board import Board
from sweepd.kinds.xla_tuning.claims import report_due, reported
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.planned import Planned
from sweepd.kinds.xla_tuning.results import BASELINE, REPORT
from sweepd.kinds.xla_tuning.waves import Candidates

# Mean claimed - true gain of timebox verdicts read on the runs that selected their recipe
# (their fresh runs, which also kept it in front look after look), on the sub-bar cells of
# bench/xla_tuning_subbar.py (100 cells, seed 1, 880 s jobs, the seed's rules): +0.51 points
# over 49 such verdicts before the block went ahead of the needs, +0.52 over 45 after.
SELECTING_OVERSTATE = 0.005


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
    """The report block of `name` (the recipe the verdict would name, else the leader) when
    the runs left cannot hold both the `need` runs it still lacks and the block (and can
    hold the block)."""
    if name is None or inp.report_runs <= 0 or board.per_run <= 0:
        return None
    due, left = report_due(inp, board, name), runs_left(inp, board)
    if not due or left >= need + len(due) or left < len(due):
        return None  # both fit; or the block would not finish before the stop either
    table = {name: cands._profile(name), BASELINE: cands.table[BASELINE]}
    why = (f"{name} leads with {runs_left(inp, board)} runs left before the "
           f"{inp.max_queue_s / 3600:g} h stop, too few for its {need} still needed runs and "
           f"its report block: the block first ({inp.report_runs} runs each of it and of the "
           "baseline, which decide nothing), so its gain is read on runs that did not "
           "select it")
    return tuple(Planned(table[p], inp.tags[0], wave + 1, REPORT, why) for p in due)


def reported_recipe(inp: Inputs, board: Board) -> str | None:
    """The recipe whose report block is measured in full (the last such made): the one the
    verdict would name when the block was made (`verdicts.named_recipe` names it where the
    block holds it above the bounded bar)."""
    t = inp.tags[0]
    done = [p for (p, tag) in board.reports if tag == t and p != BASELINE
            and reported(inp, board, p)]
    return done[-1] if done else None
