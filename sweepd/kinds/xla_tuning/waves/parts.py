"""Whether each part of a stack earns its place: a recipe keeps only parts with measured
evidence that they help (SKILL.md: "1-3 flags capture most of the win")."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import Fate
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.waves.candidates import Candidates

# A stack's part is kept when the stack beats the stack without it by PART_Z se. At 1 se a
# real part was dropped too often: PP=8's restore_default (+1.05 % on top of hpas+ovl2)
# fell to the stack without it in ~17 % of sweeps at n=4 vs 5 (real cells, seed mode: found
# 86.5 -> 93 % of 200 replays at 0.5; false winners and bias unchanged or lower).
PART_Z = 0.5
# But at 0.5 se a part with no effect is kept whenever noise lifts its stack by 0.5 se (31 %
# of single comparisons). A gap in (PART_Z_DROP, PART_Z_KEEP] se is ambiguous: the stack and
# the stack without the part are re-run (each up to PART_N runs) before the verdict; at the
# cap the PART_Z rule decides.
PART_Z_KEEP = 1.0
PART_Z_DROP = 0.0
PART_N = 4
POOL_GATE = 2.0  # se: a context whose gap disagrees with the stack's own by more is not pooled


@dataclass(frozen=True)
class Pruned:
    name: str  # the recipe with every part that showed no measured help left out
    left_out: tuple[str, ...]  # each dropped part, with the measurement that dropped it
    untested: tuple[str, ...]  # stacks without one part that were never run
    # Parts whose gap is ambiguous and under the run cap: (stack, stack without the part),
    # re-run by the planner until the gap leaves the zone or both reach PART_N runs.
    checking: tuple[tuple[str, str], ...] = ()
    tested: tuple[str, ...] = ()  # parts decided after re-runs, with the deciding measurement


def _without(board: Board, sub: str, t: str) -> tuple[float | None, int]:
    """The stack without a part, on every run but its first. Its first run may be the one
    that selected it (a pair put forward on a lucky run); read with that run the stack
    without the part leads by the luck and a real part is left out (PP=8: restore_default
    dropped from the +5.79 % truth while ovl2 + async priority, truly +4.70 %, read +6.7 %
    on its selecting run and a re-run). Its claim runs count here: they are the runs that
    show the luck (a claim that came in at +4.7 %), and reading them costs the claim of
    the stack without the part no measured bias (docs/benchmarks.md)."""
    s, b = board.get(sub, t), board.base(t)
    if s is None or b is None or not s.n:
        return None, 1
    rest = s.samples[1:] or s.samples
    return statistics.fmean(rest) / b.mean - 1, len(rest)


def _pooled_z(board: Board, t: str, parts: list[str], part: str, gap: float,
              var: float) -> tuple[float, int]:
    """A part's help in standard errors, from the stack against the stack without it
    (`gap`, relative variance `var` in units of the noise's square) pooled with the part's
    other measured contexts inside the stack: each smaller stack of the other parts, with
    and without the part. One comparison at 0.8 % noise and four runs a side cannot tell a
    1-point part from none (PP=8's restore_default and async priority, each ~+1 point, were
    left out of the truth in ~1 replay in 10); the same part measured on the stack's
    sub-stacks says it again. A context whose gap disagrees with the stack's own by more
    than POOL_GATE se (an interaction) is left out of the pool. The part alone against the
    baseline is not a context: pooled, it kept parts that help alone and add nothing on the
    stack (useless parts in seed mode 2.75 -> 4.6 % of verdicts over the random families).
    A part with no effect anywhere still reads N(0, 1) se, so the rules' thresholds keep
    their meaning. Returns z and how many other contexts it pooled."""
    others = [q for q in parts if q != part]
    weight, acc, pooled = 1 / var, gap / var, 0
    for k in range(1, len(others)):
        for rest in itertools.combinations(others, k):
            got = _context(board, t, rest, part)
            if got is None:
                continue
            g, v = got
            if abs(g - gap) > POOL_GATE * board.noise * math.sqrt(v + var):
                continue
            weight += 1 / v
            acc += g / v
            pooled += 1
    return acc / weight / (board.noise * math.sqrt(1 / weight)), pooled


def _context(board: Board, t: str, rest: tuple[str, ...], part: str
             ) -> tuple[float, float] | None:
    """The part's gap on the sub-stack `rest` and its variance in units of the noise's
    square; None when either side was not measured."""
    on, off = board.get("+".join(sorted([*rest, part])), t), board.get("+".join(rest), t)
    if on is None or off is None or not on.ranked or not off.ranked:
        return None
    d1, d0 = board.delta(on.profile, t), board.delta(off.profile, t)
    if d1 is None or d0 is None:
        return None
    return d1 - d0, 1 / len(on.ranked) + 1 / len(off.ranked)


def _part_text(board: Board, t: str, name: str, sub: str, z: float, pool: int) -> str:
    fresh = len(board.retest(name, t))
    top = board.retest_delta(name, t) if fresh else board.delta(name, t)
    low, nlow = _without(board, sub, t)
    runs = f"{fresh} re-run{'s' if fresh != 1 else ''}" if fresh else "n=1"
    return (f"{name} {top or 0.0:+.2%} ({runs}) vs {sub} {low or 0.0:+.2%} "
            f"({nlow} run{'s' if nlow != 1 else ''} after its first) without it"
            + (f"; with {pool} other context{'s' if pool != 1 else ''} in the stack" if pool
               else "") + f": {z:+.1f} se")


def pruned(inp: Inputs, board: Board, cands: Candidates, name: str) -> Pruned:
    """A recipe keeps only parts with measured evidence that they help. For each part, the
    gap between the stack and the stack without it, in standard errors (z): above
    PART_Z_KEEP the part is kept, at or below PART_Z_DROP it is left out (the most useless
    first, then again). Between the two the part is ambiguous: the planner re-runs the stack
    and the stack without it (`checking`) until z leaves the zone or both have PART_N runs;
    at the cap (or at a stop before it) the part is kept above PART_Z. A stack without a part
    that was never run is `untested` (the planner runs it before the verdict)."""
    t = inp.tags[0]
    left: list[str] = []
    checking: list[tuple[str, str]] = []
    tested: list[str] = []
    while True:
        parts = name.split("+")
        if len(parts) < 2:
            return Pruned(name, tuple(left), (), tuple(checking), tuple(tested))
        untested: list[str] = []
        worst: tuple[float, str, str, str, int] | None = None
        for part in parts:
            sub = "+".join(sorted(q for q in parts if q != part))
            e, s = board.get(name, t), board.get(sub, t)
            if s is None or (not s.n and s.fate is Fate.OPEN):
                untested.append(sub)
                continue
            if e is None or not e.n or not s.n:
                continue  # the stack without the part cannot run: the part is needed
            # The stack on its fresh runs: the run that selected it was the best of many,
            # and that lucky run alone kept neutral parts at > 1 se (the winner's curse).
            fresh = len(board.retest(name, t))
            top = board.retest_delta(name, t) if fresh else board.delta(name, t)
            low, nlow = _without(board, sub, t)
            gap = (top or 0.0) - (low or 0.0)
            ne, ns = len(e.ranked), len(s.ranked)
            z, pool = _pooled_z(board, t, parts, part, gap, 1 / (fresh or ne) + 1 / nlow)
            retested = ns >= 2  # the stack without it re-run: the gap was tested
            capped = ne >= PART_N and ns >= PART_N
            why, check = _part_why(z, bool(fresh), capped)
            if check:
                checking.append((name, sub))
                if not fresh:
                    untested.append(sub)
            if z <= (PART_Z if why.startswith("ambiguous") else PART_Z_DROP):
                if worst is None or z < worst[0]:
                    worst = (z, part, sub, why, pool)
            elif retested and fresh:
                tested.append(f"{part} kept ({_part_text(board, t, name, sub, z, pool)}"
                              f"{'; ' + why if why else ''})")
        if worst is None:
            return Pruned(name, tuple(left), tuple(untested), tuple(checking), tuple(tested))
        z, part, sub, why, pool = worst
        left.append(f"{part} ({_part_text(board, t, name, sub, z, pool)}: {why})")
        name = sub


def _part_why(z: float, retested: bool, capped: bool) -> tuple[str, bool]:
    """Why a part at z se above the stack without it would be left out ("": kept), and
    whether the planner re-runs the pair first."""
    unsettled = f"ambiguous, not settled before the stop: the {PART_Z} se rule"
    if not retested and z > PART_Z_DROP:
        # Above the stack without it on the stack's selecting run alone: that run was the
        # best of many and keeps a neutral part at > 1 se (seed mode's useless parts).
        # Not tested until the stack is re-run.
        return (unsettled if z <= PART_Z_KEEP else ""), True
    if PART_Z_DROP < z <= PART_Z_KEEP:
        if not capped:
            return unsettled, True
        return f"ambiguous at the {PART_N}-run cap: the {PART_Z} se rule", False
    return ("no measured help" if z <= PART_Z_DROP else ""), False
