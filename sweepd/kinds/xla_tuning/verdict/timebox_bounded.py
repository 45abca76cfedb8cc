"""The 8 h stop's reading of the bounded rule: whether what was run when the queue-time
budget ran out meets it (>= 25 profiles, none significantly above +2 %, no contender cut off
before its re-run, every mechanism seeded), so the verdict says "bounded" rather than only
"no change so far" (the timebox verdict)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.bounded_question import BASE_FLOOR, open_question
from sweepd.kinds.xla_tuning.verdict.bounded_stack import bounded_blocked
from sweepd.kinds.xla_tuning.verdict.stops import bounded_verdict, shapes_due
from sweepd.kinds.xla_tuning.verdict.structure import Caveat, CaveatKind
from sweepd.kinds.xla_tuning.verdict.verdicts import one_run_lead
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.planned import Verdict


def bounded_at_the_stop(inp: Inputs, board: Board, cands: Candidates) -> Verdict | None:
    """At the 8 h stop, the SKILL.md's bounded rule read on what was run (>= 25 profiles,
    none significantly above +2 %; on PP, Wave 5 run): a sweep whose last runs set off a
    re-run or a stack the stop then cut off met the rule all the same (a flat cell whose
    family values read a contender by noise ended on the timebox in 26 of 100 seeds)."""
    primary = inp.tags[0]
    tried = cands.distinct_tried()
    base = board.base(primary)
    if (tried < inp.bounded_count or shapes_due(cands)
            or (inp.bounded_question and (base.n if base is not None else 0) < BASE_FLOOR)
            or any(board.claim.above(e.profile, primary, inp.bounded_gain)
                   for e in board.measured(primary))
            or _one_run_contender(inp, board) or _unseeded(cands)
            or bounded_blocked(inp, cands)
            or (inp.bounded_question
                and open_question(inp, board, cands, fresh_only=True) is not None)):
        # Fewer than BASE_FLOOR baseline runs (no bounded verdict rests on them: with few
        # runs a contender is not re-run, nor the baseline with it, and a +3.2 % single
        # stood behind one high baseline run), a contender the stop cut off before its
        # re-run, a recipe reading above the bar on too few fresh runs to say (a true
        # +3.2 % read +2.6 % on two), or a mechanism never run: the scope is not shown
        # bounded, only "no change so far" (the timebox verdict); so is a stack the singles
        # predict above the bar not run, or one reading above it (`bounded_stack.py`).
        return None
    cut = dict.fromkeys(it[0].name for it in (*cands.steps.confirmations(), *cands.steps.stacks()))
    said = Caveat(CaveatKind.CUT_AT_STOP, f"read at the {inp.max_queue_s / 3600:g} h stop, "
                  "which came before " + ", ".join(cut) + " could run",
                  {"cut": list(cut)}) if cut else None
    return bounded_verdict(inp, board, cands, tried, said)


def _one_run_contender(inp: Inputs, board: Board) -> bool:
    """A profile run once that read above the bounded bar (a +7 % reading at 1.5 % noise
    was left unconfirmed and the cell called bounded)."""
    lead = one_run_lead(inp, board)
    return lead is not None and lead[1] > inp.bounded_gain


def _unseeded(cands: Candidates) -> bool:
    """A mechanism of the cell none of whose profiles ran on the primary tag (the +7 %
    NCCL flag's mechanism was never reached when flakes ate the time)."""
    ran = cands.board.parts_run(cands.primary)
    return any(not any(p.name in ran for p in cands.inp.catalog if m in p.mechanisms)
               for m in cands.order if m is not Mechanism.PIPELINE
               and any(m in p.mechanisms for p in cands.inp.catalog))
