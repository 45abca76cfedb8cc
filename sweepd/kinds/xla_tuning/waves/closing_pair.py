"""The closing wave's pair: before the 8 h stop spends its last runs confirming a leader that
reads under the win bar, the stack of the two best singles runs once when it is predicted
above the leader (issue 43, item 2b). `closing_stacks` runs a stack only when it is
predicted to reach the win bar; below the bar a +3.4 % overlap limit and a +1 % scheduler
flag (together +4.7 %) were never run together, and the verdict proposed the single.

The two best singles: the best single of each flag (a numeric family's best value), read
above POSITIVE and clear of one standard error of noise, the two best of those that stack
(different flags, within max_flags). Predicted: their gains compounded. Off unless
`Inputs.closing_pair` (measured: docs/benchmarks.md)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.waves import wave_rules as rules
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item, best_recipe


def best_singles(c: CandidatesBase) -> list[str]:
    """The best single of each flag, read above POSITIVE and clear of noise, best first."""
    top: dict[str, str] = {}
    for e in c._candidates():
        d = c._d(e.profile)
        if "+" in e.profile or d < max(rules.POSITIVE, c.board.search_se(e.profile, c.primary)):
            continue
        fam = c._profile(e.profile).family or e.profile
        if fam not in top or d > c._d(top[fam]):
            top[fam] = e.profile
    return sorted(top.values(), key=lambda n: -c._d(n))


def reading(c: CandidatesBase, name: str) -> float:
    """A recipe's delta on its fresh runs, else on all of them."""
    fd = c.board.claim.delta(name, c.primary)
    return c._d(name) if fd is None else fd


def closing_pair(c: CandidatesBase) -> list[Item]:
    """The stack of the two best singles that stack, once, when the 8 h stop is near at few
    runs, the leader reads under the win bar and the stack is predicted above it."""
    if not c.inp.closing_pair or not rules.few_runs(c.inp, c.board):
        return []
    singles = best_singles(c)
    lead = best_recipe(c) or (singles[0] if singles else None)
    if lead is None or reading(c, lead) >= c.inp.win:
        return []
    for i, a in enumerate(singles):
        for b in singles[i + 1:]:
            s = c._on_top(a, b)
            if s is None:
                if c._profile(a).keys & c._profile(b).keys:
                    continue
                return []  # the best pair ran already (or cannot run): once a sweep
            pred = (1 + c._d(a)) * (1 + c._d(b)) - 1
            if pred <= reading(c, lead):
                return []
            return [(s, c.primary, rule_book.CLOSING_PAIR.id,
                     f"{a} {c._d(a):+.2%} + {b} {c._d(b):+.2%}: {pred:+.2%} if they add up, "
                     f"above the leader {lead} {reading(c, lead):+.2%} (closing: the stack "
                     "of the two best singles runs before the leader's last runs)")]
    return []
