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
The records and the judge are kinds/network/judge.py; what the tests prove,
kinds/network/proof.py; this module plans the waves.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from sweepd.kinds.network.judge import Group, Judge, Outcome, Wanted
from sweepd.kinds.network.proof import Proof, bits

MAX_BLOCK_SPLITS = 8        # blocks whose halves are tried in every orientation


def _halves(members: list[int]) -> tuple[int, int]:
    mid = (len(members) + 1) // 2
    return sum(1 << i for i in members[:mid]), sum(1 << i for i in members[mid:])


def _blocks(proof: Proof, mask: int) -> list[list[int]]:
    """The group as sets of nodes already proven to work together (greedy, in pinned
    order), unproven nodes as one more set."""
    blocks: list[list[int]] = []
    loose = [i for i in bits(mask & ~proof.cleared)]
    for i in bits(mask & proof.cleared):
        for block in blocks:
            if all(proof.partners[i] >> j & 1 for j in block):
                block.append(i)
                break
        else:
            blocks.append([i])
    return ([loose] if loose else []) + blocks


def _split(proof: Proof, mask: int) -> tuple[int, int]:
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


def _components(proof: Proof, mask: int) -> list[int]:
    """The group's candidates fall apart into sets of nodes linked by unproven pairs; each
    set holds its own faults and is searched on its own, in parallel."""
    out = []
    rest = mask
    while rest:
        comp = rest & -rest
        frontier = comp
        while frontier:
            reach = 0
            for i in bits(frontier):
                reach |= mask & ~proof.partners[i]
            frontier = reach & ~comp
            comp |= reach
        rest &= ~comp
        if comp.bit_count() >= 2:
            out.append(comp)
    return out


@dataclass
class _Wave:
    proof: Proof
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
            for h in bits(pool):
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
            parts = [1 << i for i in bits(comp & ~p.cleared)]
        else:
            parts = [comp]   # one unproven pair of good nodes
        role = "half" if comp & ~p.cleared else "cross"   # unknown nodes, or links only
        for part in parts:
            if part.bit_count() >= 2:
                wave.add(part, role)
            elif part & ~p.cleared:
                wave.confirm(part, mask, searched)


def _plan(p: Proof, judge: Judge) -> tuple[list[tuple[int, str]], list[int]]:
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
        proof = Proof(nodes, judge, done, results)
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
