"""The verdict: which recipe it names (the leader the planner confirms, the recipe a stop
names), its gain and interval from runs that did not select it (worded in
`verdict_claim.py`), and whether it is conditional (what a deployment would still need)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Profile
from sweepd.kinds.xla_tuning.catalog.flags import unrestorable
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import RESTORE, Fate
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.bounded_question import open_note
from sweepd.kinds.xla_tuning.verdict.bounded_stack import stack_note
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
from sweepd.kinds.xla_tuning.waves.parts import pruned
from sweepd.kinds.xla_tuning.waves.planned import Verdict, VerdictKind, profiles
from sweepd.kinds.xla_tuning.waves.wave_rules import BASE_N


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
             left_out: tuple[str, ...] = (), tested: tuple[str, ...] = ()) -> Verdict:
    """The verdict: its recipe (given, else the best significantly above the bounded bar on
    fresh runs, its useless parts left out), the gain and interval from runs that did not
    select it, and whether it is conditional (what a deployment would still need)."""
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
    gain: float | None = None
    interval: tuple[float, float] | None = None
    n, held = 0, True
    missing: list[str] = []
    regressed: tuple[str, ...] = ()
    if recipe is None:
        bounded = kind is VerdictKind.BOUNDED
        why += ("" if bounded else "; no change: nothing significantly above "
                f"+{inp.bounded_gain:.0%} on runs that did not select it, bounded so far "
                f"({tried} profiles)")
        if kind is VerdictKind.TIMEBOX:
            why += ((open_note(inp, board, cands) or stack_note(inp, cands))
                    + _reach_note(inp, board, tried))
    else:
        gain, interval, n, said, held = gain_said(inp, board, kind, recipe)
        why += said
        if kind is not VerdictKind.PROPOSAL:
            why += (f": confirmed >= +{inp.win:.0%}" if confirmed_win(inp, board, recipe)
                    else f": significantly above +{inp.bounded_gain:.0%}, not confirmed >= "
                         f"+{inp.win:.0%}; proposed as such")
        # What a deployment needs reads the confirming runs; the block only reports.
        missing, regressed = _missing(inp, board, recipe, len(board.claim.fresh(recipe, t)),
                                      untested)
        if not held:
            missing.insert(0, f"the runs made after it was decided put it at {gain:+.2%}, "
                              f"not significantly above +{inp.bounded_gain:.0%}")
    if left:
        why += "; left out: " + "; ".join(left)
    if tested:
        why += "; tested: " + "; ".join(tested)
    why += _one_run_note(inp, board, gain)
    if missing:
        why += "; conditional: " + "; ".join(missing)
    why += untried_note(inp, board, recipe) + in_effect_note(inp)
    kept = unrestorable(inp.deployed)
    if kept:
        why += ("; not measured: removing the env file's " + ", ".join(s.label for s in kept)
                + " (no default known to put back: restore_default left "
                + ("it" if len(kept) == 1 else "them") + ")")
    why += "".join(restore_dropped(board, tag, tag != t) for tag in inp.tags)
    win, said = win_said(inp, board, recipe, gain, held)
    why += said
    return Verdict(kind, rule, why, recipe, gain, regressed, bool(missing),
                   "; ".join(missing), interval, n, left, tried, win, tested)


def _one_run_note(inp: Inputs, board: Board, gain: float | None) -> str:
    """A profile above the verdict's gain on its one run is said, not counted."""
    lead = one_run_lead(inp, board)
    if lead is not None and lead[1] > max(gain or 0.0, inp.bounded_gain):
        return f"; unconfirmed (one run, not counted): {lead[0]} {lead[1]:+.2%}"
    return ""


def one_run_lead(inp: Inputs, board: Board) -> tuple[str, float] | None:
    """The fastest profile run only once on the primary tag, and its delta."""
    t = inp.tags[0]
    lead1 = max((e for e in board.measured(t) if e.n == 1), default=None,
                key=lambda e: board.delta(e.profile, t) or -1.0)
    d1 = board.delta(lead1.profile, t) if lead1 else None
    return (lead1.profile, d1) if lead1 is not None and d1 is not None else None


def restore_dropped(board: Board, tag: str, named: bool = False) -> str:
    """restore_default dropped without a measurement on `tag` (an OOM: the env file's values
    are what let the job fit): said, since the verdict then rests on the env file as
    deployed. `named`: the tag is said (another than the primary)."""
    entry = board.get(RESTORE, tag)
    if entry is None or entry.n or entry.fate in (Fate.OPEN, Fate.MEASURED):
        return ""
    detail = f" ({entry.detail})" if entry.detail else ""
    where = f" on {tag}" if named else ""
    return (f"; restore_default (the env file's settings put back to the image's defaults)"
            f"{where} {entry.fate.value}{detail}: the env file's settings stay as deployed")


def _missing(inp: Inputs, board: Board, recipe: str, n: int, untested: tuple[str, ...]
             ) -> tuple[list[str], tuple[str, ...]]:
    """What a deployment of the recipe would still need, and the tags it regresses."""
    missing: list[str] = []
    if n < MIN_FRESH:
        missing.append(f"confirmed on {n} fresh run(s), not {MIN_FRESH}")
    if untested:
        missing.append("not tested without one part: " + ", ".join(untested))
    reg = _regressed(inp, board, recipe)
    if reg is None:
        for state, said in (("open", "not run"), ("rerun", "not finished")):
            todo = [tg for tg in inp.tags[1:] if cross_tag(inp, board, recipe, tg) == state]
            if todo:
                missing.append(f"Wave 6 {said} on {', '.join(todo)}")
        return missing, ()
    for tg in inp.tags[1:]:
        if cross_tag(inp, board, recipe, tg) == "unresolved":
            d, lo, hi = tag_interval(board, recipe, tg)
            missing.append(f"Wave 6 unresolved on {tg}: {d:+.2%} (95 % interval {lo:+.2%} to "
                           f"{hi:+.2%}) after {board.get(recipe, tg).n} runs "  # type: ignore[union-attr]
                           f"and {board.base(tg).n} of its baseline: a regression "  # type: ignore[union-attr]
                           f"> {inp.regress:.0%} not ruled out")
    if reg:
        missing.append(f"regresses {', '.join(reg)} by > {inp.regress:.0%}: config-conditional")
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


def _reach_note(inp: Inputs, board: Board, tried: int) -> str:
    """Say when the job length put the bounded rule out of the 8 h budget's reach."""
    if tried >= inp.bounded_count or not board.runs:
        return ""
    per_run = board.per_run
    if per_run <= 0:
        return ""
    cap = int(inp.max_queue_s // per_run)
    note = (f"; the bounded rule needs {inp.bounded_count} profiles: at "
            f"~{per_run / 60:.0f} min of queue time per job, {inp.max_queue_s / 3600:g} h "
            f"holds ~{cap} runs")
    wave1 = board.runs - sum(e.n + e.flakes for (p, tg), e in board.entries.items()
                             if e.first_wave >= 2)
    if cap < inp.bounded_count + max(0, wave1) + BASE_N:
        note += ": unreachable at this job length"
    return note
