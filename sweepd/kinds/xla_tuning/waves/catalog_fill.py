"""What of the catalog the search left unrun: a catalog spent short of the bounded rule's
count filled first (the ends of flat numeric families, then pairs of the fastest singles),
and the untried values of numeric families (also run before a bounded verdict:
`family_gaps.py`)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism
from sweepd.kinds.xla_tuning.evidence.results import RESTORE, Entry
from sweepd.kinds.xla_tuning.waves import wave_rules as rules
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item


class CatalogFill:
    def __init__(self, c: CandidatesBase) -> None:
        self.c = c  # what every rule reads

    def pairs(self) -> list[Item]:
        """The catalog spent short of the seed's bounded count (SKILL.md: "tested >= 25
        distinct profiles"; "a single flag (or 2-3 flag stack)"): pairs of the singles that
        measured fastest, the best predicted first, until the count is reached. Singles too
        small to clear the noise alone can be large together (a pair of +1.2 % singles gave
        +6.5 %: "catalog exhausted after 21 profiles" was called bounded without it)."""
        left = self.c.inp.bounded_count - self.c.distinct_tried()
        if left <= 0:
            return []
        short = f"{left} profiles short of the bounded rule's {self.c.inp.bounded_count}"
        gaps = self.untried_values(rules.POINTED, short) if self.c.inp.family_gaps else []
        return [*self._flat_ends(left), *self.top_pairs(short), *gaps][:left]

    def top_pairs(self, why: str) -> list[Item]:
        """Pairs of the five fastest singles of distinct families, best predicted first."""
        best: dict[str, Entry] = {}
        for e in self.c._candidates():
            fam = self.c._profile(e.profile).family or e.profile
            if ("+" not in e.profile and e.profile != RESTORE and self.c._d(e.profile) > 0
                    and (fam not in best or self.c._d(e.profile) > self.c._d(best[fam].profile))):
                best[fam] = e
        top = sorted(best.values(), key=lambda e: -self.c._d(e.profile))[:rules.PAIR_SINGLES]
        out: list[tuple[float, Item]] = []
        for i, a in enumerate(top):
            for b in top[i + 1:]:
                s = self.c._on_top(a.profile, b.profile)
                if s is not None:
                    pred = (1 + self.c._d(a.profile)) * (1 + self.c._d(b.profile)) - 1
                    out.append((pred, (s, self.c.primary, rule_book.PAIR_FILL.id,
                                       f"{a.profile} {self.c._d(a.profile):+.2%} + {b.profile} "
                                       f"{self.c._d(b.profile):+.2%}: {pred:+.2%} if they add "
                                       f"up; {why}")))
        out.sort(key=lambda x: -x[0])
        return [it for _, it in out]

    def untried_values(self, mechanisms: int, why: str = "") -> list[Item]:
        """The untried values of the numeric families in the evidence's first `mechanisms`,
        mechanism by mechanism, in each the value farthest from any value run first (a
        value may help on its own between flat or falling neighbours: `family_gaps.py`)."""
        pointed = [m for m in self.c.order if m is not Mechanism.PIPELINE][:mechanisms]
        out: list[tuple[int, int, int, Item]] = []
        for fam, members in self.c._numeric_families().items():
            rank = next((i for i, m in enumerate(pointed) if m in members[0].mechanisms), None)
            run = [p.position for p in members if not self.c._ok(p)]
            if rank is None or not run:
                continue
            ran = ", ".join(m.name for m in members if m.position in run)
            for p in members:
                if self.c._ok(p):
                    gap = min(abs(p.position - q) for q in run)
                    out.append((len(run), rank, -gap, (p, self.c.primary, rule_book.FAMILY_GAP.id, (
                        f"{fam} run at {ran}; {p.name} not yet: a value may help on its own "
                        "where its neighbours do not; " + (why or "run before a bounded "
                        "verdict, in queue time the sweep would leave unused")))))
        out.sort(key=lambda x: (x[0], x[1], x[2]))
        return [it for *_, it in out]

    def _flat_ends(self, left: int) -> list[Item]:
        """Numeric families run at one value that read flat: their ends first (an effect
        may sit at one extreme only; a family's ends are tried up front only in the
        mechanism the evidence points at, so an overlap limit of 2 worth +6.5 % in the
        fourth was left while pairs of noise-level singles filled the count)."""
        out: list[Item] = []
        for fam, members in self.c._numeric_families().items():
            done = [p for p in members if not self.c._ok(p)]
            if len(done) != 1 or abs(self.c._d(done[0].name)) >= rules.LIVE:
                continue
            out += [(p, self.c.primary, rule_book.FILL_ENDS.id,
                     f"{fam}: flat at {done[0].name} ({self.c._d(done[0].name):+.2%}), its only "
                     f"value run; trying its end {p.name} ({left} profiles short of the "
                     f"bounded rule's {self.c.inp.bounded_count})")
                    for p in (members[0], members[-1]) if self.c._ok(p)]
        return out
