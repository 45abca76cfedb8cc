"""Network fault isolation by adaptive group testing over nodes and links, as a pure replay.

A test runs one multi-node job on a group; the group is *degraded* when its TGS falls below
the expected TGS for its size (or the job failed). A group is degraded when it holds a bad
node (slow NIC) or both ends of a bad link. What the tests prove is kept as *items*: a node
is cleared once it ran in a healthy group, a pair of nodes once both ran in the same healthy
group. The candidates of a degraded group are its items not cleared yet; it holds a fault
among them.

Each wave (disjoint groups, run in parallel; prior-art.md, "Node performance and network
isolation") is planned from what the results prove so far:

1. The whole group (without an absolute reference, also its halves: what it is judged by).
2. Every smallest unexplained degraded group is split in two, in parallel; when its
   candidates fall into separate sets of nodes, each set is split on its own. The split
   halves every set of nodes already proven to work together, so a degraded group made of
   two clean halves is searched along its cross pairs (a bad link *between* the halves), and
   a group of unknown nodes is halved as usual. The split that leaves the fewest candidates
   on average wins.
3. A degraded pair cannot say which side is bad: each unproven member runs with a different
   known-good node -> bad node (degraded with two different good partners), or bad link
   (only candidate left in a degraded group).
4. Every node no search needs runs in one *clearing* group in the same wave: it proves the
   pairs the searches leave behind, so a second fault hidden behind the first shows up (and
   is searched) while the first is still being narrowed, and no separate verification wave
   is needed at the end when the searches leave nothing unproven.

Done when every item is cleared, a named fault, or touches a node the verdict excludes (a
bad node, or the later end of a bad link; the other end stays in service and is proven like
any node). Two bad links at one node look like that node's NIC and are named so. When no job
is ever healthy (a wrong reference, shared infrastructure) the search stops instead of
blaming every node.

The state is rebuilt from the results on every call (`advance`), so the planner stays pure
and restart-safe: the same nodes, judge and results always lead to the same next wave.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

Group = frozenset[str]
MAX_BLOCK_SPLITS = 8        # blocks whose halves are tried in every orientation
ALL_DEGRADED = 4            # disjoint degraded groups, none healthy: not a few bad nodes


@dataclass(frozen=True)
class Judge:
    """Expected TGS per group size: from a reference (TGS/device of one node) and the best
    result seen so far, scaled between sizes by `scaling` per doubling of nodes."""

    reference: float | None = None
    tolerance: float = 0.05
    scaling: float = 0.97
    # Failure-only (the SKILL.md's `-- steps=1`): a group either trains or fails; no TGS
    # is measured, so a group that ran is healthy and nothing is compared.
    failure_only: bool = False

    @property
    def absolute(self) -> bool:
        """Each group is judged on its own (against a reference, or by failing at all), not
        only against the other groups."""
        return self.reference is not None or self.failure_only

    def expected(self, size: int, seen: Mapping[Group, float | None]) -> float | None:
        if self.failure_only:
            return None
        candidates = [self.reference * self._scale(1, size)] if self.reference else []
        candidates += [tgs * self._scale(len(g), size) for g, tgs in seen.items() if tgs]
        return max(candidates, default=None)

    def _scale(self, from_size: int, to_size: int) -> float:
        return float(self.scaling ** (math.log2(to_size) - math.log2(from_size)))

    def degraded(self, tgs: float | None, expected: float | None) -> bool:
        if tgs is None:
            return True  # the job failed or hung: the group cannot train
        if self.failure_only:
            return False
        return expected is not None and tgs < expected * (1 - self.tolerance)


@dataclass(frozen=True)
class Test:
    group: Group
    wave: int
    role: str                   # whole | half | cross | confirm | verify
    tgs: float | None
    expected: float | None
    degraded: bool


@dataclass(frozen=True)
class Fault:
    kind: str                   # node | link | pair / group (unresolved: could not narrow)
    nodes: tuple[str, ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    faults: tuple[Fault, ...]
    tests: tuple[Test, ...]
    rounds: int
    absolute: bool              # False: judged only against the group itself (no reference)


@dataclass(frozen=True)
class Wanted:
    groups: list[tuple[Group, str]]   # (group, role) of the current wave without a result yet
    tests: tuple[Test, ...]           # finished so far
    rounds: int


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class _Proof:
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
                for i in _bits(m):
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
        return [self.nodes[i] for i in _bits(mask)]

    def open_pairs(self, mask: int) -> int:
        """Pairs inside `mask` not proven yet."""
        return sum((mask & ~self.partners[i] & ~((2 << i) - 1)).bit_count() for i in _bits(mask))

    def candidates(self, mask: int) -> int:
        return (mask & ~self.cleared).bit_count() + self.open_pairs(mask)

    def _nics(self) -> dict[int, tuple[int, ...]]:
        """A node is bad when degraded groups that have nothing else unproven share no other
        node: one bad node explains them all, no single link can."""
        found: dict[int, tuple[int, ...]] = {}
        for x in _bits(self.all & ~self.cleared):
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
            for i in _bits(m):
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


def _halves(members: list[int]) -> tuple[int, int]:
    mid = (len(members) + 1) // 2
    return sum(1 << i for i in members[:mid]), sum(1 << i for i in members[mid:])


def _blocks(proof: _Proof, mask: int) -> list[list[int]]:
    """The group as sets of nodes already proven to work together (greedy, in pinned
    order), unproven nodes as one more set."""
    blocks: list[list[int]] = []
    loose = [i for i in _bits(mask & ~proof.cleared)]
    for i in _bits(mask & proof.cleared):
        for block in blocks:
            if all(proof.partners[i] >> j & 1 for j in block):
                block.append(i)
                break
        else:
            blocks.append([i])
    return ([loose] if loose else []) + blocks


def _split(proof: _Proof, mask: int) -> tuple[int, int]:
    """Two parts of `mask` that halve every block, oriented so that the outcomes (first
    part degraded, second degraded, or neither: a cross pair) leave the fewest candidates
    on average (sum of squares: a lopsided split wastes the wave)."""
    halves = [_halves(b) for b in _blocks(proof, mask)]
    total = proof.candidates(mask)
    best: tuple[int, int, int] | None = None
    flips: Iterator[tuple[bool, ...]]
    if len(halves) <= MAX_BLOCK_SPLITS:
        flips = itertools.product((False, True), repeat=len(halves) - 1)
    else:
        flips = iter([(False,) * (len(halves) - 1),
                      tuple(i % 2 == 0 for i in range(len(halves) - 1))])
    for flip in flips:
        one = halves[0][0]
        for (a, b), swap in zip(halves[1:], flip, strict=True):
            one |= b if swap else a
        two = mask & ~one
        if not one or not two:
            continue
        c1, c2 = proof.candidates(one), proof.candidates(two)
        score = c1 * c1 + c2 * c2 + (total - c1 - c2) ** 2
        if best is None or score < best[0]:
            best = (score, one, two)
    assert best is not None
    return best[1], best[2]


def _components(proof: _Proof, mask: int) -> list[int]:
    """The group's candidates fall apart into sets of nodes linked by unproven pairs; each
    set holds its own faults and is searched on its own, in parallel."""
    out = []
    rest = mask
    while rest:
        comp = rest & -rest
        frontier = comp
        while frontier:
            reach = 0
            for i in _bits(frontier):
                reach |= mask & ~proof.partners[i]
            frontier = reach & ~comp
            comp |= reach
        rest &= ~comp
        if comp.bit_count() >= 2:
            out.append(comp)
    return out


@dataclass
class _Wave:
    proof: _Proof
    groups: list[tuple[int, str]] = field(default_factory=list)
    reserved: int = 0   # the group being searched: its nodes are not its own helpers

    @property
    def busy(self) -> int:
        return functools.reduce(operator.or_, (m for m, _ in self.groups), self.reserved)

    def add(self, mask: int, role: str) -> None:
        self.groups.append((mask, role))

    def confirm(self, node: int, group: int, searched: int) -> None:
        """Run an unproven node with a known-good one, free this wave, preferring nodes
        outside every open search. While nothing is known good yet, any free node outside
        its group will do: a healthy pair proves both."""
        p = self.proof
        free = p.all & ~self.busy & ~p.faulty
        for pool in (free & p.cleared & ~searched, free & p.cleared, free & ~group):
            for h in _bits(pool):
                if node | 1 << h not in p.tested:
                    self.add(node | 1 << h, "confirm")
                    return


def _search(wave: _Wave, mask: int, searched: int) -> None:
    """The tests that narrow down one open degraded group."""
    p = wave.proof
    for comp in _components(p, mask):
        if comp.bit_count() > 2:
            parts = list(_split(p, comp))
        elif comp & ~p.cleared:
            parts = [1 << i for i in _bits(comp & ~p.cleared)]
        else:
            parts = [comp]   # one unproven pair of good nodes
        role = "half" if comp & ~p.cleared else "cross"   # unknown nodes, or links only
        for part in parts:
            if part.bit_count() >= 2:
                wave.add(part, role)
            elif part & ~p.cleared:
                wave.confirm(part, mask, searched)


def _plan(p: _Proof, judge: Judge) -> tuple[list[tuple[int, str]], list[int]]:
    """The next wave, and the open groups left unresolved when it is empty."""
    if not p.tests:
        return ([(p.all, "whole")] if len(p.nodes) >= 2 else []), []
    if not judge.absolute and len(p.tests) == 1 and len(p.nodes) >= 4:
        members = list(range(len(p.nodes)))
        return [(h, "half") for h in _halves(members)], []
    if p.all_degraded():
        return [], []
    groups = p.open_groups()
    wave = _Wave(p)
    searched = functools.reduce(operator.or_, groups, 0)
    for m in groups:
        if not m & wave.busy:
            wave.reserved = m
            _search(wave, m, searched)
            wave.reserved = 0
    clearing = p.all & ~wave.busy & ~p.faulty & ~searched
    if clearing.bit_count() >= 2 and p.candidates(clearing) and clearing not in p.tested:
        wave.add(clearing, "verify")
    planned = [(m, r) for m, r in wave.groups if m not in p.tested]
    if planned:
        return planned, []
    if not p.cleared and len(p.nodes) > 2:
        return [], []   # nothing ever healthy and nothing left to try: as all_degraded
    return [], groups


def advance(nodes: Sequence[str], results: Mapping[Group, float | None],
            judge: Judge) -> Wanted | Outcome:
    """The groups the next wave still needs, or the outcome once every fault is isolated.

    `results` maps every finished group to its TGS (None: the job failed)."""
    done: list[tuple[Group, int, str]] = []
    waves = 0
    while True:
        proof = _Proof(nodes, judge, done, results)
        planned, unresolved = _plan(proof, judge)
        wave = [(frozenset(proof.names(m)), role) for m, role in planned]
        if not wave:
            return Outcome(tuple(proof.faults(unresolved)), tuple(proof.tests), waves,
                           judge.absolute)
        missing = [(g, role) for g, role in wave if g not in results]
        if missing:
            return Wanted(missing, tuple(proof.tests), waves)
        waves += 1
        done += [(g, waves, role) for g, role in wave]
