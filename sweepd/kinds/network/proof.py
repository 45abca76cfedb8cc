"""What a network search's finished tests prove (kinds/network/isolation.py plans from it):
groups as bit masks over the pinned node order; the nodes cleared (ran in a healthy group),
the pairs proven (ran together in one), the bad NICs and bad links the degraded groups
leave no other explanation for, and the faults named with their evidence. Rebuilt from the
results on every call, so it holds no state of its own."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Mapping, Sequence

from sweepd.kinds.network.judge import Fault, Group, Judge, Test

ALL_DEGRADED = 4            # disjoint degraded groups, none healthy: not a few bad nodes


def bits(mask: int) -> Iterator[int]:
    """The positions of the mask's set bits, lowest first (a group's node indices)."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class Proof:
    """What the finished tests prove, with groups as bit masks over the pinned node order."""

    def __init__(self, nodes: Sequence[str], judge: Judge,
                 done: Sequence[tuple[Group, int, str]],
                 results: Mapping[Group, float | None]) -> None:
        self.nodes = list(nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.all = (1 << len(self.nodes)) - 1
        seen = {g: results[g] for g, _, _ in done}
        self.tests = []
        for g, wave, role in done:
            expected = judge.expected(len(g), seen)
            self.tests.append(Test(g, wave, role, results[g], expected,
                                   judge.degraded(results[g], expected)))
        self.masks = [self.mask(t.group) for t in self.tests]
        self.tested = frozenset(self.masks)
        self.cleared = 0                       # nodes that ran in a healthy group
        self.partners = [0] * len(self.nodes)  # node -> nodes it ran healthy with
        for t, m in zip(self.tests, self.masks, strict=True):
            if not t.degraded:
                self.cleared |= m
                for i in bits(m):
                    self.partners[i] |= m
        self.bad = [m for t, m in zip(self.tests, self.masks, strict=True) if t.degraded]
        self.nics = self._nics()
        self.links = self._links()
        # Nodes the verdict takes out: bad nodes, and the later end of each bad link (the
        # caller excludes that one; the other end stays in service, so it is proven).
        self.faulty = sum(1 << i for i in self.nics) | sum(b for _, b in self.links)

    def mask(self, nodes: Sequence[str] | Group) -> int:
        return sum(1 << self.index[n] for n in nodes)

    def names(self, mask: int) -> list[str]:
        return [self.nodes[i] for i in bits(mask)]

    def open_pairs(self, mask: int) -> int:
        """Pairs inside `mask` not proven yet."""
        return sum((mask & ~self.partners[i] & ~((2 << i) - 1)).bit_count() for i in bits(mask))

    def candidates(self, mask: int) -> int:
        return (mask & ~self.cleared).bit_count() + self.open_pairs(mask)

    def _nics(self) -> dict[int, tuple[int, ...]]:
        """A node is bad when degraded groups that have nothing else unproven share no other
        node: one bad node explains them all, no single link can."""
        found: dict[int, tuple[int, ...]] = {}
        for x in bits(self.all & ~self.cleared):
            bit = 1 << x
            own = [m for m in self.bad if m & bit and not (m & ~bit & ~self.cleared)
                   and self.open_pairs(m & ~bit) == 0]
            if len(own) >= 2 and not functools.reduce(operator.and_, own) & ~bit:
                found[x] = tuple(own)
        return found

    def _links(self) -> dict[tuple[int, int], int]:
        """A link is bad when it is the only thing unproven in a degraded group."""
        found: dict[tuple[int, int], int] = {}
        for m in self.bad:
            if m & ~self.cleared or self.open_pairs(m) != 1:
                continue
            for i in bits(m):
                rest = m & ~self.partners[i] & ~((2 << i) - 1)
                if not rest:
                    continue
                key = (1 << i, rest)
                if key not in found or m.bit_count() < found[key].bit_count():
                    found[key] = m   # the smallest such group is the clearest evidence
        return found

    def all_degraded(self) -> bool:
        """No job was ever healthy and at least ALL_DEGRADED disjoint jobs were slow: a wrong
        reference or shared infrastructure, not a few bad nodes or links."""
        if self.cleared:
            return False
        taken = count = 0
        for m in sorted(self.bad, key=int.bit_count):
            if not m & taken:
                taken, count = taken | m, count + 1
        return count >= ALL_DEGRADED

    def explained(self, mask: int) -> bool:
        return any(mask >> x & 1 for x in self.nics) or any(
            mask & a and mask & b for a, b in self.links)

    def open_groups(self) -> list[int]:
        """Smallest degraded groups no named fault explains, fewest candidates first."""
        groups = [m for m in self.bad if not self.explained(m)]
        smallest = [m for m in groups if not any(o != m and o & m == o for o in groups)]
        return sorted(smallest, key=lambda m: (self.candidates(m), m))

    def faults(self, unresolved: Sequence[int]) -> list[Fault]:
        out: list[Fault] = []
        for x, groups in self.nics.items():
            out.append(Fault("node", (self.nodes[x],), tuple(
                f"{_name(self.names(m))} degraded ({_name(self.names(m & ~(1 << x)))} "
                "known good)" for m in sorted(groups, key=int.bit_count)[:2])))
        for (a, b), m in self.links.items():
            ends = tuple(self.names(a | b))
            proof = [f"{_name(self.names(m))} degraded"]
            proof += [f"{n} healthy in {_name(self._healthy_with(n))}" for n in ends]
            out.append(Fault("link", ends, tuple(proof)))
        for m in unresolved:
            kind = "pair" if m.bit_count() == 2 else "group"
            out.append(Fault(kind, tuple(self.names(m)), (
                f"{_name(self.names(m))} degraded; no known-good nodes left to narrow it",)))
        return sorted(out, key=lambda f: self.index[f.nodes[0]])

    def _healthy_with(self, node: str) -> list[str]:
        bit = 1 << self.index[node]
        healthy = [m for t, m in zip(self.tests, self.masks, strict=True)
                   if not t.degraded and m & bit]
        return self.names(min(healthy, key=lambda m: (m.bit_count(), m)))


def _name(nodes: Sequence[str]) -> str:
    return ",".join(nodes)
