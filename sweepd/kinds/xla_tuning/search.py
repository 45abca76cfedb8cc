"""The wave planner (xla-tuning.SKILL.md Steps 3-7), pure: results in, next runs or a verdict out.

Wave 1 the baseline pair per config tag and Wave 1.5 the evidence run go out together; the
evidence orders the mechanisms. Then each wave (<= wave_size runs, planned once the previous
wave has finished, as the SKILL.md pauses to review) is filled in this order: re-runs of
results that would change the verdict, the neighbours of the best value of every numeric
family whose first value showed an effect, stacks of confirmed winners, then one first
value per family not yet tried, in mechanism order (`search_steps.py`). Once that has plateaued,
the endgame polishes the leading recipe: each numeric part moved to its neighbour values,
each single that measured >= +0.5 % added on top. Wave 5 (PP) tries pipeline shapes on top
of the best recipe after that (and before any bounded verdict); Wave 6 runs the winning
recipe on every other config tag, re-run with that tag's baseline until its delta clears
-1 % either way (else "unresolved", a conditional verdict).
A catalog spent short of the bounded rule's 25 profiles is filled with pairs of its fastest
singles (`Candidates.pairs`) before the sweep may end. Every planned run and every verdict
carries its rule and its evidence.

This module is the loop; its parts: `claims.py` (when a claim is confirmed), `parts.py`
(whether each part of a stack earns its place), `verdicts.py` (the recipe a verdict names,
its gain and what it still lacks), `stops.py` (the stop rules and what a verdict needs
first), `planned.py` (what the planner hands out), `next_wave.py` (a wave filled in the
order above). Catalog profiles that change nothing for the job are left out first
(`in_effect.py`), and so are those that act on collectives alone in a program that has none
(`no_collectives.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Evidence, Profile, stack
from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import Fate, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.bounded_question import before_bounded_question
from sweepd.kinds.xla_tuning.verdict.closing_block import block_first, leading
from sweepd.kinds.xla_tuning.verdict.stops import (
    needs_for,
    report_block,
    run_cap,
    runs_spent,
    seed_winner,
    stop_rule,
    verdict_needs,
    winner,
    within_budget,
)
from sweepd.kinds.xla_tuning.verdict.timebox_bounded import bounded_at_the_stop
from sweepd.kinds.xla_tuning.verdict.verdicts import (
    leader,
    make_verdict,
    named_recipe,
    verdict_leader,
)
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.claims import WIN_MARGIN, confirmed_win
from sweepd.kinds.xla_tuning.waves.in_effect import without_in_effect
from sweepd.kinds.xla_tuning.waves.next_wave import wave_candidates
from sweepd.kinds.xla_tuning.waves.no_collectives import without_collectives
from sweepd.kinds.xla_tuning.waves.parts import Pruned, pruned
from sweepd.kinds.xla_tuning.waves.planned import (
    BASELINE_PROFILE,
    EVIDENCE_PROFILE,
    Plan,
    Planned,
    Verdict,
    VerdictKind,
    profiles,
)
from sweepd.kinds.xla_tuning.waves.wave_rules import closing


def plan(inp: Inputs, results: Sequence[Result], evidence: Evidence | None) -> Plan:
    inp = without_in_effect(inp, results)  # a profile that changes nothing is never run
    inp = without_collectives(inp, evidence, results)  # nor one with nothing to act on
    board = build(results, inp.noise, inp.max_flakes, inp.drift)
    wave = max(board.waves, default=0)
    if board.queue_s >= inp.max_queue_s or runs_spent(inp, board):
        return _at_the_stop(inp, board, evidence, wave)
    retries = _retries(inp, board, wave)
    if board.pending:
        return run_cap(inp, board, retries)
    wave1 = _wave1(inp, board)
    if wave1 or retries:
        return within_budget(inp, board, (*wave1, *retries))
    cands = Candidates(inp, board, evidence, profiles(inp))
    if inp.stop == "seed":
        done = seed_winner(inp, board, cands, wave)
        if done is not None:
            return done
        lead = leader(inp, board, cands)
        t = inp.tags[0]
        if lead is not None and ((board.delta(lead, t) or 0.0) - board.se(lead, t)
                                 >= inp.win - WIN_MARGIN):
            # Good enough may be in hand: what the winner rule needs goes first (the
            # leader's parts tested, fresh runs of it, the baseline at n=3; Wave 6 once
            # it is confirmed, so a leader that falls back costs no cross-tag run).
            need = needs_for(inp, board, cands, lead, wave6=confirmed_win(inp, board, lead))[1]
            first = _block_first(inp, board, cands, len(need), wave) if need else None
            if first:
                return first
            if need:
                return within_budget(inp, board, tuple(
                    Planned(p, tag, wave + 1, rule, reason) for p, tag, rule, reason in need))
    closing = _before_the_stop(inp, board, cands, wave)
    if closing:
        return closing
    fresh = wave_candidates(cands)
    stop = stop_rule(inp, board, cands, bool(fresh))
    if stop is not None:
        return stop
    return within_budget(inp, board, tuple(Planned(p, tag, wave + 1, rule, reason)
                                           for p, tag, rule, reason in fresh))


def _at_the_stop(inp: Inputs, board: Board, evidence: Evidence | None, wave: int) -> Plan:
    """The 8 h of queue time, or the spec's max_runs, are spent: the runs in flight finish,
    then the verdict reads what was run."""
    if board.pending:
        return ()  # nothing new; the runs in flight finish (else left on the cluster)
    cands = Candidates(inp, board, evidence, profiles(inp))
    done = winner(inp, board, cands, wave, report=False)
    if isinstance(done, Verdict):
        return done  # the last wave in made the winner rule: it is that stop, not 8 h
    bounded = bounded_at_the_stop(inp, board, cands)
    if bounded is not None:
        return bounded
    if board.queue_s < inp.max_queue_s:   # the spec's run cap, not the 8 h
        return make_verdict(inp, board, VerdictKind.TIMEBOX, rule_book.MAX_RUNS.id,
                            f"{board.runs} runs made: the spec's max_runs "
                            f"({inp.max_runs}) reached")
    return make_verdict(inp, board, VerdictKind.TIMEBOX, rule_book.TIMEBOX.id,
                    f"{board.queue_s / 3600:.1f} h of queue time >= "
                    f"{inp.max_queue_s / 3600:.0f} h")


def _before_the_stop(inp: Inputs, board: Board, cands: Candidates, wave: int
                     ) -> tuple[Planned, ...] | None:
    """The 8 h stop is near: what the verdict needs (the leader confirmed, its parts
    tested, Wave 6) goes before anything new, so the timebox verdict has it (unless the runs
    left hold those needs or the report block, not both: the block first, `block_first`,
    so the verdict's gain is read on runs that did not select it); once it has,
    the recipe it would name is measured once more on runs that decide nothing, and the
    timebox verdict reads its gain there. A numeric family rising toward an unrun value at
    the edge of its values run, and a stack predicted to reach the win bar, are tried first
    while the leader reads under the bar (`SearchSteps.closing_firsts`: those runs could not
    confirm it anyway)."""
    need = verdict_needs(inp, board, cands)
    if need and closing(inp, board, len(need)):
        first = _block_first(inp, board, cands, len(need), wave)
        if first:
            return first
        return within_budget(inp, board, tuple(
            Planned(p, tag, wave + 1, rule, reason + " (before the 8 h stop)")
            for p, tag, rule, reason in [*cands.steps.closing_firsts(), *need]))
    # A recipe above the bounded bar, not significantly, is measured further so the timebox
    # verdict can say which it is (proposed, or no change) rather than leave it open.
    # It goes before the report block's window, which keeps its runs once it opens.
    block = 2 * inp.report_runs
    if not need and closing(inp, board, block):
        done = report_block(inp, board, cands, wave)
        if done:
            return done
    question = [] if need else before_bounded_question(inp, board, cands, floor=False)
    if question and closing(inp, board, len(question) + block):
        return within_budget(inp, board, tuple(
            Planned(p, tag, wave + 1, rule, reason + " (before the 8 h stop)")
            for p, tag, rule, reason in [*cands.steps.closing_firsts(), *question]))
    return None


def _block_first(inp: Inputs, board: Board, cands: Candidates, need: int, wave: int
                 ) -> tuple[Planned, ...] | None:
    """The report block of the recipe the verdict would name (else of a leader its runs
    put significantly above the bounded bar) before `need` runs the runs left cannot also
    hold (`closing_block.py`)."""
    named = named_recipe(inp, board, cands)
    name = named[0] if named else leading(inp, board, cands)
    return block_first(inp, board, cands, name, need, wave)


def _wave1(inp: Inputs, board: Board) -> tuple[Planned, ...]:
    """Baseline pair per tag and the evidence run, until each has a result or is dropped."""
    restore = restore_default(inp.deployed)
    want = [(BASELINE_PROFILE, t, rule_book.BASELINE.id, "the env file as deployed")
            for t in inp.tags]
    if restore is not None:
        why = "env file's flags back to their defaults: " + ", ".join(
            s.label for s in restore.settings)
        want += [(restore, t, rule_book.RESTORE_DEFAULT.id, why) for t in inp.tags]
    want.append((EVIDENCE_PROFILE, inp.tags[0], rule_book.EVIDENCE.id,
                 "profiler + HLO dump on baseline-deployed: orders the catalog"))
    return tuple(Planned(p, t, 1, rule, why) for p, t, rule, why in want
                 if board.get(p.name, t) is None)


def _retries(inp: Inputs, board: Board, wave: int) -> tuple[Planned, ...]:
    """Failure playbook: a flake is retried (<= max_flakes), a lost profile re-placed once."""
    out: list[Planned] = []
    table = profiles(inp)
    for e in board.entries.values():
        if e.fate is not Fate.OPEN or e.pending or e.n:
            continue
        prof = table.get(e.profile) or _resolve(table, e.profile)
        if e.not_applied:
            out.append(Planned(prof, e.tag, max(wave, 1), rule_book.NOT_APPLIED_RETRY.id,
                               f"{e.profile}'s flags lost to {e.detail or 'a later setting'}; "
                               "re-placed where they win"))
        elif e.flakes:
            out.append(Planned(prof, e.tag, max(wave, 1), rule_book.FLAKE_RETRY.id,
                               f"flake {e.flakes}/{inp.max_flakes}: retried"))
    return tuple(out)


def _resolve(table: dict[str, Profile], name: str) -> Profile:
    """A stack from its parts' names; a result for a profile the sweep never had is refused."""
    missing = [part for part in name.split("+") if part not in table]
    if missing:
        raise ValueError(f"result for profile {name!r}: not in this sweep's catalog "
                         f"({', '.join(missing)})")
    return stack(tuple(table[part] for part in name.split("+")))


__all__ = ["EVIDENCE_PROFILE", "Inputs", "Plan", "Planned", "Pruned", "Verdict",
           "VerdictKind", "confirmed_win", "plan", "profiles", "pruned", "verdict_leader",
           "within_budget"]
