"""What every rule of a wave reads: the board's deltas on the primary config tag, the
sweep's profiles by name (stacks included), the catalog's numeric families, a single stacked
on a recipe, and the best recipe so far (`best_recipe`). The rules themselves:
`search_steps.py`, `catalog_fill.py`, `later_waves.py`, each a part of
`candidates.Candidates` over this."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import (
    Evidence,
    Mechanism,
    Profile,
    mechanism_order,
    stack,
)
from sweepd.kinds.xla_tuning.evidence.board import Board
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Entry, Fate
from sweepd.kinds.xla_tuning.inputs import Inputs

Item = tuple[Profile, str, str, str]  # profile, config tag, rule, reason


@dataclass
class CandidatesBase:
    inp: Inputs
    board: Board
    evidence: Evidence | None
    table: dict[str, Profile]

    def __post_init__(self) -> None:
        self.primary = self.inp.tags[0]
        self.order = mechanism_order(self.inp.parallelism, self.evidence)
        self.unknown = {e.detail for e in self.board.entries.values()
                        if e.fate is Fate.UNKNOWN_FLAG}

    def _d(self, name: str, tag: str | None = None) -> float:
        d = self.board.search_delta(name, tag or self.primary)
        return -math.inf if d is None else d

    def _ok(self, p: Profile) -> bool:
        """Untried on the primary tag and free of a flag the image already rejected."""
        return self.board.get(p.name, self.primary) is None and not (p.keys & self.unknown)

    def _candidates(self) -> list[Entry]:
        skip = {BASELINE, EVIDENCE}
        return [e for e in self.board.measured(self.primary) if e.profile not in skip]

    def distinct_tried(self) -> int:
        """Distinct profiles run in Waves 2-4 (pipeline shapes are Wave 5)."""
        return sum(1 for (p, t), e in self.board.entries.items()
                   if t == self.primary and e.first_wave >= 2 and p not in (BASELINE, EVIDENCE)
                   and Mechanism.PIPELINE not in self._profile(p).mechanisms)

    def _profile(self, name: str) -> Profile:
        if name in self.table:
            return self.table[name]
        missing = [part for part in name.split("+") if part not in self.table]
        if missing:
            raise ValueError(f"result for profile {name!r}: not in this sweep's catalog "
                             f"({', '.join(missing)})")
        return stack(tuple(self.table[part] for part in name.split("+")))

    def _numeric_families(self) -> dict[str, list[Profile]]:
        """The catalog's numeric families (pipeline shapes are Wave 5's), by position."""
        families: dict[str, list[Profile]] = {}
        for p in self.table.values():
            if p.family and Mechanism.PIPELINE not in p.mechanisms:
                families.setdefault(p.family, []).append(p)
        for members in families.values():
            members.sort(key=lambda p: p.position)
        return families

    def _on_top(self, leader: str, single: str) -> Profile | None:
        """The leader with one more single stacked on it, if they set different flags, stay
        within the flag limit and the stack may still run."""
        base, part = self._profile(leader), self._profile(single)
        if part.keys & base.keys or len(base.settings) + len(part.settings) > \
                self.inp.max_flags:
            return None
        s = self._profile("+".join(sorted([*leader.split("+"), single])))
        return s if self._ok(s) else None


def best_recipe(c: CandidatesBase) -> str | None:
    """The best profile of at most max_flags settings measured at least twice."""
    ok = [e for e in c._candidates()
          if e.n >= 2 and len(c._profile(e.profile).settings) <= c.inp.max_flags]
    top = max(ok, key=lambda e: c._d(e.profile), default=None)
    return top.profile if top is not None and c._d(top.profile) > 0 else None
