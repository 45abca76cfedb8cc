"""The verdict: which recipe it names (the leader the planner confirms, the recipe a stop
names), its gain and interval from runs that did not select it (`verdict_claim.py`), and
whether it is conditional (what a deployment would still need), built once as a structure
(`structure.py`, each caveat typed) whose prose is `render.py`'s."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Profile
from sweepd.kinds.xla_tuning.catalog.flags import unrestorable
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import RESTORE, Fate
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.rules import NO_COLLECTIVES
from sweepd.kinds.xla_tuning.verdict.bounded_question import open_note, open_question
from sweepd.kinds.xla_tuning.verdict.bounded_stack import stack_above, stack_note, unrun_stack
from sweepd.kinds.xla_tuning.verdict.quiet import quiet_caveat
from sweepd.kinds.xla_tuning.verdict.render import reason
from sweepd.kinds.xla_tuning.verdict.structure import (
    Caveat,
    Conclusion,
    Decided,
    Gain,
    Outcome,
    Recipe,
    caveat,
)
from sweepd.kinds.xla_tuning.verdict.structure import CaveatKind as K
from sweepd.kinds.xla_tuning.verdict.verdict_claim import gain_said, win_said
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.claims import (
    MIN_FRESH,
    confirmed_win,
    cross_tag,
    report_holds,
    reported,
    reported_recipe,
    screening,
    tag_interval,
)
from sweepd.kinds.xla_tuning.waves.in_effect import in_effect_note
from sweepd.kinds.xla_tuning.waves.no_collectives import note as collectives_note
from sweepd.kinds.xla_tuning.waves.parts import pruned
from sweepd.kinds.xla_tuning.waves.planned import VerdictKind, profiles
from sweepd.kinds.xla_tuning.waves.wave_rules import CONFIRM_BASE_N


def recipes(inp: Inputs, board: Board, cands: Candidates) -> list[str]:
    return [e.profile for e in board.measured(inp.tags[0])
            if len(cands._profile(e.profile).settings) <= inp.max_flags]


def leader(inp: Inputs, board: Board, cands: Candidates) -> str | None:
    """The leading recipe: above the bounded bar, best by its mean over every run less one
    standard error. It is what the planner confirms and what a verdict names."""
    t = inp.tags[0]
    up = [n for n in recipes(inp, board, cands)
          if (board.search_delta(n, t) or 0) > inp.bounded_gain]
    return max(up, key=lambda n: (board.search_delta(n, t) or 0.0) - board.search_se(n, t),
               default=None)


def verdict_leader(inp: Inputs, board: Board, cands: Candidates) -> str | None:
    """The recipe a verdict names: of those significantly above the bounded bar on their
    fresh runs, those a deployment needs nothing more for first (confirmed, parts tested,
    Wave 6 run), then the one whose selecting run was best."""
    t = inp.tags[0]
    ok = [n for n in recipes(inp, board, cands) if board.claim.above(n, t, inp.bounded_gain)]

    def ready(n: str) -> bool:  # nothing a deployment would still need
        return not _missing(inp, board, n, len(board.claim.fresh(n, t)),
                            pruned(inp, board, cands, n).untested)[0]

    return max(ok, key=lambda n: (ready(n), screening(board, n, t)), default=None)


def prospect(inp: Inputs, board: Board, cands: Candidates) -> str | None:
    """The recipe the 8 h plan makes verdict-ready: the leader."""
    return leader(inp, board, cands)


def named_recipe(inp: Inputs, board: Board, cands: Candidates
                 ) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    """The recipe a verdict without a given one names (the verdict leader, its useless
    parts left out), with the parts left out, untested and tested; None: no change."""
    lead = verdict_leader(inp, board, cands)
    blocked = reported_recipe(inp, board)
    if (blocked is not None and (lead is None or not reported(inp, board, lead))
            and report_holds(inp, board, blocked)):
        # The block made before the 8 h stop (`closing_block.py`) measured it apart and
        # holds it above the bounded bar: it is named on those runs, whatever the runs
        # that selected the others read (one that does not hold is not named: a flat
        # cell's leader would be proposed on noise).
        return blocked, (), pruned(inp, board, cands, blocked).untested, ()
    if lead is None:
        return None
    p = pruned(inp, board, cands, lead)
    if not board.claim.above(p.name, inp.tags[0], inp.bounded_gain):
        return lead, (), p.untested, ()  # the kept part: no fresh evidence
    return p.name, p.left_out, p.untested, p.tested


def make_verdict(inp: Inputs, board: Board, kind: VerdictKind, rule: str, why: str,
                 cands: Candidates | None = None, recipe: str | None = None,
                 left_out: tuple[str, ...] = (), tested: tuple[str, ...] = (),
                 notes: tuple[Caveat, ...] = ()) -> Decided:
    """The verdict: its recipe (given, else the best significantly above the bounded bar on
    fresh runs, its useless parts left out), the gain and interval from runs that did not
    select it, and whether it is conditional (what a deployment would still need). `why` is
    the deciding rule's statement, `notes` what the stop adds to it. Built once as a
    structure (`structure.Conclusion`); its prose is `render.reason`'s."""
    t = inp.tags[0]
    cands = cands or Candidates(inp, board, None, profiles(inp))
    tried = cands.distinct_tried()
    left: tuple[str, ...] = ()
    untested: tuple[str, ...] = ()
    if recipe is None and kind is not VerdictKind.BOUNDED:
        named = named_recipe(inp, board, cands)
        if named is not None:
            recipe, left, untested, tested = named
    elif recipe is not None:
        left = left_out
    said: list[Caveat | None] = list(notes)
    gain: Gain | None = None
    missing: list[Caveat] = []
    regressed: tuple[str, ...] = ()
    if recipe is None:
        outcome = Outcome.BOUNDED if kind is VerdictKind.BOUNDED else Outcome.NO_CHANGE
        if kind is VerdictKind.TIMEBOX:
            said += [open_caveat(inp, board, cands), _reach_caveat(inp, board, tried)]
    else:
        gain, overstate = gain_said(inp, board, kind, recipe)
        said.append(overstate)
        outcome = (Outcome.DEPLOY if kind is VerdictKind.PROPOSAL
                   or confirmed_win(inp, board, recipe) else Outcome.BELOW_WIN)
        # What a deployment needs reads the confirming runs; the block only reports.
        missing, regressed = _missing(inp, board, recipe, len(board.claim.fresh(recipe, t)),
                                      untested)
        if not gain.held:
            missing.insert(0, Caveat(
                K.NOT_HELD, f"the runs made after it was decided put it at {gain.value:+.2%}, "
                f"not significantly above +{inp.bounded_gain:.0%}", {"gain": gain.value}))
    said.append(_one_run_caveat(inp, board, gain.value if gain else None))
    said += missing
    never = _never(inp, board)
    said.append(caveat(K.NONE_TRIED if never == len(inp.catalog) else K.UNTRIED,
                       untried_note(inp, board, recipe).removeprefix("; "), never=never))
    said.append(caveat(K.IN_EFFECT, in_effect_note(inp).removeprefix("; "),
                       profiles=list(inp.in_effect)))
    said.append(caveat(K.NO_COLLECTIVES, collectives_note(inp), rule=NO_COLLECTIVES.id,
                       profiles=list(inp.no_collectives), evidence=inp.no_collectives_why))
    kept = unrestorable(inp.deployed)
    if kept:
        said.append(Caveat(K.ENV_FIXED, "not measured: removing the env file's "
                           + ", ".join(s.label for s in kept)
                           + " (no default known to put back: restore_default left "
                           + ("it" if len(kept) == 1 else "them") + ")",
                           {"settings": [s.label for s in kept]}))
    said += [restore_dropped_caveat(board, tag, tag != t) for tag in inp.tags]
    win, backed = win_said(inp, board, recipe, gain.value if gain else None,
                           gain.held if gain else True)
    said.append(backed)
    said.append(quiet_caveat(inp, board))
    c = Conclusion(rule, kind, outcome, why,
                   Recipe(recipe, left, tested) if recipe is not None else None, gain, tried,
                   inp.bounded_gain, inp.win, win, tuple(x for x in said if x is not None))
    needs = "; ".join(n.text for n in c.needs())
    return Decided(kind, rule, reason(c), recipe, gain.value if gain else None, regressed,
                   c.conditional, needs, gain.interval if gain else None,
                   gain.n if gain else 0, left, tried, win, tested, said=c)


def open_caveat(inp: Inputs, board: Board, cands: Candidates) -> Caveat | None:
    """What a "no change" verdict leaves open (`open_note`, else `stack_note`)."""
    text = open_note(inp, board, cands)
    if text:
        return Caveat(K.OPEN_QUESTION, text.removeprefix("; "),
                      {"profile": open_question(inp, board, cands, fresh_only=True)})
    text = stack_note(inp, cands)
    if not text:
        return None
    top = unrun_stack(inp, cands)
    if top is not None:
        return Caveat(K.UNRUN_STACK, text.removeprefix("; "),
                      {"profile": top[0][0].name, "predicted": top[1]})
    return Caveat(K.STACK_ABOVE, text.removeprefix("; "), {"profile": stack_above(inp, cands)})


def _never(inp: Inputs, board: Board) -> int:
    ran = board.parts_run(inp.tags[0])
    return sum(p.name not in ran for p in inp.catalog)


def _one_run_caveat(inp: Inputs, board: Board, gain: float | None) -> Caveat | None:
    """A profile above the verdict's gain on its one run is said, not counted."""
    lead = one_run_lead(inp, board)
    if lead is not None and lead[1] > max(gain or 0.0, inp.bounded_gain):
        return Caveat(K.ONE_RUN_LEAD, f"unconfirmed (one run, not counted): {lead[0]} "
                      f"{lead[1]:+.2%}", {"profile": lead[0], "delta": lead[1]})
    return None


def one_run_lead(inp: Inputs, board: Board) -> tuple[str, float] | None:
    """The fastest profile run only once on the primary tag, and its delta."""
    t = inp.tags[0]
    lead1 = max((e for e in board.measured(t) if e.n == 1), default=None,
                key=lambda e: board.delta(e.profile, t) or -1.0)
    d1 = board.delta(lead1.profile, t) if lead1 else None
    return (lead1.profile, d1) if lead1 is not None and d1 is not None else None


def restore_dropped_caveat(board: Board, tag: str, named: bool = False) -> Caveat | None:
    """restore_default dropped without a measurement on `tag` (an OOM: the env file's values
    are what let the job fit): said, since the verdict then rests on the env file as
    deployed. `named`: the tag is said (another than the primary)."""
    entry = board.get(RESTORE, tag)
    if entry is None or entry.n or entry.fate in (Fate.OPEN, Fate.MEASURED):
        return None
    detail = f" ({entry.detail})" if entry.detail else ""
    where = f" on {tag}" if named else ""
    return Caveat(K.RESTORE_DROPPED,
                  f"restore_default (the env file's settings put back to the image's defaults)"
                  f"{where} {entry.fate.value}{detail}: the env file's settings stay as "
                  "deployed", {"tag": tag, "fate": entry.fate.value, "detail": entry.detail})


def _missing(inp: Inputs, board: Board, recipe: str, n: int, untested: tuple[str, ...]
             ) -> tuple[list[Caveat], tuple[str, ...]]:
    """What a deployment of the recipe would still need, and the tags it regresses."""
    missing: list[Caveat] = []
    if n < MIN_FRESH:
        missing.append(Caveat(K.FEW_FRESH, f"confirmed on {n} fresh run(s), not {MIN_FRESH}",
                              {"fresh": n, "needed": MIN_FRESH}))
    if untested:
        missing.append(Caveat(K.UNTESTED_PARTS, "not tested without one part: "
                              + ", ".join(untested), {"parts": list(untested)}))
    reg = _regressed(inp, board, recipe)
    if reg is None:
        for state, said, kind in (("open", "not run", K.WAVE6_NOT_RUN),
                                  ("rerun", "not finished", K.WAVE6_NOT_FINISHED)):
            todo = [tg for tg in inp.tags[1:] if cross_tag(inp, board, recipe, tg) == state]
            if todo:
                missing.append(Caveat(kind, f"Wave 6 {said} on {', '.join(todo)}",
                                      {"tags": todo}))
        return missing, ()
    for tg in inp.tags[1:]:
        if cross_tag(inp, board, recipe, tg) == "unresolved":
            d, lo, hi = tag_interval(board, recipe, tg)
            missing.append(Caveat(
                K.WAVE6_UNRESOLVED,
                f"Wave 6 unresolved on {tg}: {d:+.2%} (95 % interval {lo:+.2%} to "
                f"{hi:+.2%}) after {board.get(recipe, tg).n} runs "  # type: ignore[union-attr]
                f"and {board.base(tg).n} of its baseline: a regression "  # type: ignore[union-attr]
                f"> {inp.regress:.0%} not ruled out",
                {"tag": tg, "delta": d, "interval": [lo, hi]}))
    if reg:
        missing.append(Caveat(K.REGRESSES, f"regresses {', '.join(reg)} by > "
                              f"{inp.regress:.0%}: config-conditional", {"tags": list(reg)}))
    return missing, reg


def _regressed(inp: Inputs, board: Board, best: str) -> tuple[str, ...] | None:
    """Tags the recipe regresses; None while Wave 6 still has runs to do."""
    out = []
    for tag in inp.tags[1:]:
        e = board.get(best, tag)
        state = cross_tag(inp, board, best, tag)
        if state == "open" and e is not None and e.fate is not Fate.OPEN and not e.n:
            out.append(tag)  # the recipe cannot run there at all
        elif state in ("open", "rerun"):
            return None
        elif state == "regress":
            out.append(tag)
    return tuple(out)


def untried_note(inp: Inputs, board: Board, recipe: str | None = None) -> str:
    """What of the catalog a verdict without a recipe never ran: how many profiles, the
    mechanisms and families never tried, the numeric families tried at one value only, and
    the values of the others never run. A negative finding is only as wide as what was
    run. Any verdict says when no catalog profile ran at all (restore_default alone can
    win in Wave 1)."""
    ran = board.parts_run(inp.tags[0])
    never = [p for p in inp.catalog if p.name not in ran]
    if len(never) == len(inp.catalog):
        return (f"; no catalog profile tried: all {len(never)} never run, the verdict rests "
                "on Wave 1 alone")
    if not never or recipe is not None:
        return ""
    fams: dict[str, list[Profile]] = {}
    for p in inp.catalog:
        fams.setdefault(p.family or p.name, []).append(p)
    cold = {f: ms for f, ms in fams.items() if not any(m.name in ran for m in ms)}
    mechs: dict[str, list[str]] = {}
    for ms in cold.values():
        for m in sorted(ms[0].mechanisms):
            mechs.setdefault(m, []).append("+".join(sorted(ms[0].keys)))
    dead = {m for m in mechs
            if not any(m in p.mechanisms for p in inp.catalog if p.name in ran)}
    parts = [f"not run: {len(never)} profiles"]
    if dead:
        parts.append("mechanisms " + ", ".join(f"{m} ({', '.join(mechs[m])})"
                                               for m in mechs if m in dead))
    rest = [k for m, keys in mechs.items() if m not in dead for k in keys]
    if rest:
        parts.append("families " + ", ".join(dict.fromkeys(rest)))
    once = [f"{'+'.join(sorted(ms[0].keys))} ({tried[0]} only)" for ms in fams.values()
            if len(ms) > 1 and len(tried := [m.name for m in ms if m.name in ran]) == 1]
    if once:
        parts.append("families tried at one value: " + ", ".join(once))
    # A value between or beyond those run may hold an effect the ones run did not show
    # (a threshold that helps at 512 MiB alone): a negative finding holds for those run.
    partly = [f"{'+'.join(sorted(ms[0].keys))} "
              f"({', '.join(m.name for m in ms if m.name not in ran)})"
              for ms in fams.values() if 1 < sum(m.name in ran for m in ms) < len(ms)]
    if partly:
        parts.append("family values not run: " + ", ".join(partly))
    return "; " + "; ".join(parts)


def _reach_caveat(inp: Inputs, board: Board, tried: int) -> Caveat | None:
    """Say when the job length put the bounded rule out of the 8 h budget's reach."""
    if tried >= inp.bounded_count or not board.runs:
        return None
    per_run = board.per_run
    if per_run <= 0:
        return None
    cap = int(inp.max_queue_s // per_run)
    note = (f"the bounded rule needs {inp.bounded_count} profiles: at "
            f"~{per_run / 60:.0f} min of queue time per job, {inp.max_queue_s / 3600:g} h "
            f"holds ~{cap} runs")
    wave1 = board.runs - sum(e.n + e.flakes for (p, tg), e in board.entries.items()
                             if e.first_wave >= 2)
    unreachable = cap < inp.bounded_count + max(0, wave1) + CONFIRM_BASE_N
    if unreachable:
        note += ": unreachable at this job length"
    return Caveat(K.OUT_OF_REACH, note, {"needed": inp.bounded_count, "holds": cap,
                                         "unreachable": unreachable})
