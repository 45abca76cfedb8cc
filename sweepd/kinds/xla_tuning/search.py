"""The wave planner (xla-tuning.SKILL.md Steps 3-7), pure: results in, next runs or a verdict out.

Wave 1 the baseline pair per config tag and Wave 1.5 the evidence run go out together; the
evidence orders the mechanisms. Then each wave (<= wave_size runs, planned once the previous
wave has finished, as the SKILL.md pauses to review) is filled in this order: re-runs of
results that would change the verdict, the neighbours of the best value of every numeric
family whose first value showed an effect, stacks of confirmed winners, then one first
value per family not yet tried, in mechanism order. Once that has plateaued, the endgame
polishes the leading recipe: each numeric part moved to its neighbour values, each single
that measured >= +0.5 % added on top. Wave 5 (PP) tries pipeline shapes on top
of the best recipe after that; Wave 6 runs the winning recipe on every
other config tag. Every planned run and every verdict carries its rule and its evidence.
At the 8 h stop the verdict names the best recipe measured twice, unless a single run is
more than CLEAR_LEAD standard errors ahead of it (then that run, said to be one run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sweepd.kinds.xla_tuning.board import (
    BASELINE,
    EVIDENCE,
    Board,
    Fate,
    Inputs,
    Result,
    build,
)
from sweepd.kinds.xla_tuning.catalog import Evidence, Layer, Profile, Setting, stack
from sweepd.kinds.xla_tuning.flags import restore_default
from sweepd.kinds.xla_tuning.waves import Candidates, best_recipe, wave_candidates


@dataclass(frozen=True)
class Planned:
    profile: Profile
    tag: str
    wave: int
    rule: str
    reason: str


class VerdictKind(StrEnum):
    PROPOSAL = "proposal"
    BOUNDED = "bounded"
    TIMEBOX = "timebox"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    rule: str
    reason: str
    recipe: str | None  # profile name of the best recipe; None: nothing beat baseline
    gain: float | None  # its mean delta vs baseline-deployed on the primary tag
    conditional: tuple[str, ...] = ()  # config tags the recipe regresses (> regress)


Plan = tuple[Planned, ...] | Verdict  # an empty tuple: wait for the runs in flight
CLEAR_LEAD = 2.0  # at the 8 h stop, a single run this many standard errors ahead is taken

EVIDENCE_PROFILE = Profile(EVIDENCE, (
    Setting("profiler", "xplane", Layer.MAXTEXT),
    Setting("skip_first_n_steps_for_profiler", "10", Layer.MAXTEXT),
    Setting("profiler_steps", "3", Layer.MAXTEXT),
    Setting("ENABLE_XLA_DUMP", "1", Layer.ENV),
), frozenset())
BASELINE_PROFILE = Profile(BASELINE, (), frozenset())


def plan(inp: Inputs, results: Sequence[Result], evidence: Evidence | None) -> Plan:
    board = build(results, inp.noise, inp.max_flakes)
    wave = max(board.waves, default=0)
    if board.queue_s >= inp.max_queue_s:
        return _verdict(inp, board, VerdictKind.TIMEBOX, "stop.timebox",
                        f"{board.queue_s / 3600:.1f} h of queue time >= "
                        f"{inp.max_queue_s / 3600:.0f} h")
    retries = _retries(inp, board, wave)
    if board.pending:
        return retries
    first = _wave1(inp, board)
    if first or retries:
        return (*first, *retries)
    cands = Candidates(inp, board, evidence, profiles(inp))
    fresh = wave_candidates(cands)
    stop = _stop_rule(inp, board, cands, bool(fresh))
    if stop is not None:
        return stop
    return tuple(Planned(p, tag, wave + 1, rule, reason) for p, tag, rule, reason in fresh)


def profiles(inp: Inputs) -> dict[str, Profile]:
    """Every profile the sweep can run, by name (stacks are resolved from their parts)."""
    out = {p.name: p for p in inp.catalog}
    restore = restore_default(inp.deployed)
    if restore is not None:
        out[restore.name] = restore
    out[BASELINE] = BASELINE_PROFILE
    out[EVIDENCE] = EVIDENCE_PROFILE
    return out


def _wave1(inp: Inputs, board: Board) -> tuple[Planned, ...]:
    """Baseline pair per tag and the evidence run, until each has a result or is dropped."""
    restore = restore_default(inp.deployed)
    want = [(BASELINE_PROFILE, t, "wave1.baseline", "the env file as deployed") for t in inp.tags]
    if restore is not None:
        why = "env file's flags back to image defaults: " + ", ".join(
            s.label for s in restore.settings)
        want += [(restore, t, "wave1.restore_default", why) for t in inp.tags]
    want.append((EVIDENCE_PROFILE, inp.tags[0], "wave1_5.evidence",
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
            out.append(Planned(prof, e.tag, max(wave, 1), "failure.not_applied_retry",
                               f"{e.profile}'s flags lost to {e.detail or 'a later setting'}; "
                               "re-placed where they win"))
        elif e.flakes:
            out.append(Planned(prof, e.tag, max(wave, 1), "failure.flake_retry",
                               f"flake {e.flakes}/{inp.max_flakes}: retried"))
    return tuple(out)


def _resolve(table: dict[str, Profile], name: str) -> Profile:
    """A stack from its parts' names; a result for a profile the sweep never had is refused."""
    missing = [part for part in name.split("+") if part not in table]
    if missing:
        raise ValueError(f"result for profile {name!r}: not in this sweep's catalog "
                         f"({', '.join(missing)})")
    return stack(tuple(table[part] for part in name.split("+")))


def _stop_rule(inp: Inputs, board: Board, cands: Candidates, more: bool) -> Verdict | None:
    primary = inp.tags[0]
    best = best_recipe(cands)
    if best is not None and cands.settled(best) and (board.delta(best, primary) or 0) >= inp.win:
        regressed = _regressed(inp, board, best)
        if regressed is not None:
            return _verdict(inp, board, VerdictKind.PROPOSAL, "stop.winner",
                            f"{best} confirmed >= +{inp.win:.0%} over baseline-deployed",
                            regressed, recipe=best)
    tried = cands.distinct_tried()
    top = max((board.delta(e.profile, primary) or 0.0 for e in board.measured(primary)),
              default=0.0)
    settled = not (cands.confirmations() or cands.stacks())  # small gains may add up
    if tried >= inp.bounded_count and top <= inp.bounded_gain and settled:
        return _verdict(inp, board, VerdictKind.BOUNDED, "stop.bounded",
                        f"{tried} distinct profiles in Waves 2-4, none > "
                        f"+{inp.bounded_gain:.0%}: structurally bounded at the editable scope")
    if not more:
        kind = VerdictKind.BOUNDED if top <= inp.bounded_gain else VerdictKind.EXHAUSTED
        return _verdict(inp, board, kind, "stop.catalog_exhausted",
                        f"catalog exhausted after {tried} distinct profiles; best "
                        f"{top:+.1%}")
    return None


def _regressed(inp: Inputs, board: Board, best: str) -> tuple[str, ...] | None:
    """Tags the recipe regresses; None while Wave 6 still has runs to do."""
    out = []
    for tag in inp.tags[1:]:
        d = board.delta(best, tag)
        e = board.get(best, tag)
        if d is None or e is None:
            if e is not None and e.fate is not Fate.OPEN:
                out.append(tag)  # the recipe cannot run there at all
                continue
            return None
        if d < -inp.regress:
            out.append(tag)
    return tuple(out)


def _verdict(inp: Inputs, board: Board, kind: VerdictKind, rule: str, why: str,
             conditional: tuple[str, ...] = (), recipe: str | None = None) -> Verdict:
    """The verdict with the best recipe measured at least twice (a timebox, with nothing
    confirmed yet, falls back to single runs and says so)."""
    primary = inp.tags[0]
    measured = board.measured(primary)
    cands = [e for e in measured if e.n >= 2]
    if not cands and kind is VerdictKind.TIMEBOX and measured:
        cands, why = measured, why + "; best so far from single runs"
    best = max(cands, key=lambda e: board.delta(e.profile, primary) or -1.0, default=None)
    name = recipe or (best.profile if best else None)
    gain = board.delta(name, primary) if name else None
    if gain is None or gain <= 0:
        name, gain = None, None
    lead = max(measured, key=lambda e: board.delta(e.profile, primary) or -1.0, default=None)
    lead_gain = board.delta(lead.profile, primary) if lead else None
    if (kind is VerdictKind.TIMEBOX and lead and lead_gain is not None and lead.n < 2
            and name and gain is not None and best is not None
            and lead_gain - gain > CLEAR_LEAD * board.noise * (1 + 1 / best.n) ** 0.5):
        # Out of time with a single run far ahead of the confirmed best: the noise cannot
        # explain the gap, so the run is the better bet (it stays flagged as one run).
        why += (f"; best so far from one run: {lead.profile} {lead_gain:+.2%} is more than "
                f"{CLEAR_LEAD:g} standard errors ahead of the confirmed {name} {gain:+.2%}")
        name, gain = lead.profile, lead_gain
    elif lead and lead_gain is not None and lead.n < 2 and lead_gain > (gain or 0.0):
        why += f"; unconfirmed (one run): {lead.profile} {lead_gain:+.2%}"
    if conditional:
        why += f"; regresses {', '.join(conditional)} by > {inp.regress:.0%}: config-conditional"
    return Verdict(kind, rule, why, name, gain, conditional)


__all__ = ["EVIDENCE_PROFILE", "Inputs", "Plan", "Planned", "Verdict",
           "VerdictKind", "plan"]
