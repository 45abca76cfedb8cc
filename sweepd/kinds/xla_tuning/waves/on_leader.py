"""At few runs, a flag's first run on top of a leader under the win bar (issue 43, item 2;
with `Inputs.on_leader`, off by default).

At 880-second jobs the 8 h hold ~33 runs: the search reads the evidence's numeric families
and then a first value of the other mechanisms, one run each, and a +1 % scheduler flag that
stacks with the best overlap limit to +4.7 % was run alone (its reading lost in the noise,
never stacked) or not at all; its stack ran in 1 sweep in 8. Once a leader reads under the
win bar on two runs or more, a one-value flag not yet run goes on top of the leader instead:
one run still, and it measures what the verdict would propose (the leader with the flag),
forward selection at the cost of a single. The stack's part check then runs the flag alone
(`verdict.part_check`), and a flag that adds nothing leaves the leader as it was.

Numeric families' values still run alone (their search walks a family's values), and
nothing changes with a leader at or over the bar or at 48 runs in the 8 h (measured:
docs/benchmarks.md)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.waves import wave_rules as rules
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item, best_recipe


def sub_bar_leader(c: CandidatesBase) -> str | None:
    """The best recipe run at least twice, when it reads under the win bar (on its fresh
    runs, else on all)."""
    lead = best_recipe(c)
    if lead is None:
        return None
    fd = c.board.claim.delta(lead, c.primary)
    return lead if (c._d(lead) if fd is None else fd) < c.inp.win else None


def on_leader(c: CandidatesBase, items: list[Item]) -> list[Item]:
    """`items` (first values of the catalog's families) with each one-value flag's first run
    moved on top of a sub-bar leader at few runs; one already run there is dropped."""
    if not c.inp.on_leader or not rules.few_runs(c.inp, c.board):
        return items
    lead = sub_bar_leader(c)
    if lead is None:
        return items
    fams = c._numeric_families()
    out: list[Item] = []
    for p, tag, rule, why in items:
        if len(p.settings) != 1 or len(fams.get(p.family, ())) > 1 or tag != c.primary \
                or c._profile(lead).keys & p.keys:
            out.append((p, tag, rule, why))
            continue
        s = c._on_top(lead, p.name)
        if s is None:  # run on the leader already, or beyond max_flags: alone
            if c._ok(c._profile("+".join(sorted([*lead.split("+"), p.name])))):
                out.append((p, tag, rule, why))
            continue
        out.append((s, tag, rule_book.ON_LEADER.id,
                    f"{why}; first run on top of the leader {lead} {c._d(lead):+.2%}, under "
                    f"the +{c.inp.win:.0%} bar at few runs: measures what would be proposed"))
    return out
