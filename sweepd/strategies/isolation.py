"""Network fault isolation by adaptive group testing, as a pure replay over results.

A test runs one multi-node job on a group of nodes; the group is *degraded* when its TGS
falls below the expected TGS for its size (or the job failed). A group is degraded when it
holds a bad node (slow NIC) or both ends of a bad link. The procedure, in parallel waves of
disjoint groups (prior-art.md, "Node performance and network isolation"):

1. Test the whole group (without an absolute reference, also its halves: the halves are
   what the whole is judged against).
2. Split every degraded group in halves and test all halves of all groups in one wave;
   only degraded halves are split further.
3. A degraded group whose halves are both healthy holds a bad link *between* the halves:
   descend into the cross cells, testing the diagonal sub-cells (X1+Y1, X2+Y2) of every
   candidate cell each wave; a clean diagonal leaves the off-diagonal sub-cells.
4. A degraded pair cannot say which side is bad: pair each member with a different
   known-good node (in one wave) -> bad node, or bad link between the two.
5. Verify: test all nodes minus the bad nodes and one end of each bad link; a degraded
   verification group is investigated like the whole (a second fault hid behind the first).

The state is rebuilt from scratch on every call (`advance`), so the planner stays pure and
restart-safe: the same results always lead to the same next wave.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field

Group = frozenset[str]
MAX_VERIFICATIONS = 3  # verification rounds before giving up on finding more faults


@dataclass(frozen=True)
class Judge:
    """Expected TGS per group size: from a reference (TGS/device of one node) and the best
    result seen so far, scaled between sizes by `scaling` per doubling of nodes."""

    reference: float | None = None
    tolerance: float = 0.05
    scaling: float = 0.97

    def expected(self, size: int, seen: Mapping[Group, float | None]) -> float | None:
        candidates = [self.reference * self._scale(1, size)] if self.reference else []
        candidates += [tgs * self._scale(len(g), size) for g, tgs in seen.items() if tgs]
        return max(candidates, default=None)

    def _scale(self, from_size: int, to_size: int) -> float:
        return float(self.scaling ** (math.log2(to_size) - math.log2(from_size)))

    def degraded(self, tgs: float | None, expected: float | None) -> bool:
        if tgs is None:
            return True  # the job failed or hung: the group cannot train
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
    kind: str                   # "node" | "link" | "pair" (unresolved: no good node to pair)
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


def _halves(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    mid = (len(nodes) + 1) // 2
    return list(nodes[:mid]), list(nodes[mid:])


def _name(nodes: Sequence[str]) -> str:
    return ",".join(nodes)


@dataclass
class _State:
    order: dict[str, int]                # node -> position (keeps groups in pinned order)
    judge: Judge
    results: Mapping[Group, float | None]
    seen: dict[Group, float | None] = field(default_factory=dict)
    status: dict[Group, bool] = field(default_factory=dict)   # group -> degraded
    tests: list[Test] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    waves: int = 0
    # Helper nodes already promised to a confirmation in the wave being assembled.
    claimed: set[str] = field(default_factory=set)

    def sort(self, nodes: Sequence[str] | set[str]) -> list[str]:
        return sorted(nodes, key=self.order.__getitem__)

    def good(self) -> list[str]:
        """Nodes that ran in a healthy group: their NICs work."""
        out = {n for g, bad in self.status.items() if not bad for n in g}
        return self.sort(out)


class _NeedResults(Exception):
    def __init__(self, missing: list[tuple[Group, str]]) -> None:
        self.missing = missing


def _run_wave(st: _State, wave: list[tuple[Group, str]]) -> dict[Group, bool]:
    """Look the wave up in the results; judge each group against what was known after it."""
    fresh = [(g, role) for g, role in wave if g not in st.status]
    missing = [(g, role) for g, role in fresh if g not in st.results]
    if missing:
        raise _NeedResults(missing)
    if fresh:
        st.waves += 1
        for g, _ in fresh:
            st.seen[g] = st.results[g]
        for g, role in fresh:
            expected = st.judge.expected(len(g), st.seen)
            bad = st.judge.degraded(st.results[g], expected)
            st.status[g] = bad
            st.tests.append(Test(g, st.waves, role, st.results[g], expected, bad))
    return {g: st.status[g] for g, _ in wave}


# Each investigation is a generator: it yields the tests it wants in the next wave and
# receives their verdicts (True = degraded). All live investigations share each wave.
Wave = list[tuple[Group, str]]
_Inv = Generator[Wave, dict[Group, bool], None]


def _split(st: _State, nodes: list[str], known_bad: bool) -> _Inv:
    """`nodes` is degraded (or, when not `known_bad`, judged after its halves): find why."""
    if len(nodes) == 2:
        yield from _pair(st, nodes)
        return
    a, b = _halves(nodes)
    wave = [(frozenset(h), "half") for h in (a, b) if len(h) >= 2]
    yield wave
    if not known_bad:
        # Re-judge the whole now that its halves are known (no absolute reference).
        whole = frozenset(nodes)
        expected = st.judge.expected(len(whole), st.seen)
        bad = st.judge.degraded(st.results[whole], expected)
        st.status[whole] = bad
        st.tests[:] = [t if t.group != whole else
                       Test(whole, t.wave, t.role, t.tgs, expected, bad) for t in st.tests]
        if not bad and not any(st.status[g] for g, _ in wave):
            return
    subs = [_split(st, h, True) for h in (a, b) if len(h) >= 2 and st.status[frozenset(h)]]
    # A single node left over (odd split) is never tested alone: a 1-node job has no network.
    clean = all(not st.status[frozenset(h)] for h in (a, b) if len(h) >= 2)
    if clean and len(b) == 1:
        subs.append(_lone(st, nodes, a, b[0]))
    elif clean:
        subs.append(_cross(st, [(a, b)]))
    yield from _together(subs)


def _lone(st: _State, nodes: list[str], half: list[str], node: str) -> _Inv:
    """The odd node out of a degraded group whose other half is clean: its own NIC, or a
    link to that half. Pair it with a known-good node first."""
    good = [n for n in st.good() if n != node and n not in st.claimed]
    helper = ([n for n in good if n not in nodes] or good or half)[0]
    st.claimed.add(helper)
    test = frozenset((node, helper))
    verdict = yield [(test, "confirm")]
    if verdict[test]:
        st.faults.append(Fault("node", (node,), (
            f"{_name(nodes)} degraded, {_name(half)} healthy",
            f"{node}+{helper} degraded ({helper} is known good)")))
        return
    yield from _cross(st, [(half, [node])])


def _cross(st: _State, cells: list[tuple[list[str], list[str]]]) -> _Inv:
    """A bad link lies in one of the cells X x Y (X and Y each clean on their own)."""
    while cells:
        wave: list[tuple[Group, str]] = []
        plans: list[tuple[list[tuple[list[str], list[str]]], list[tuple[list[str], list[str]]]]]
        plans = []
        for x, y in cells:
            if len(x) == 1 and len(y) == 1:
                tested = [(x, y)]
                rest: list[tuple[list[str], list[str]]] = []
            else:
                x1, x2 = _halves(x) if len(x) > 1 else (x, [])
                y1, y2 = _halves(y) if len(y) > 1 else (y, [])
                tested = [(x1, y1)] + ([(x2, y2)] if x2 and y2 else [])
                rest = [(p, q) for p, q in ((x1, y2), (x2, y1)) if p and q]
            plans.append((tested, rest))
            wave += [(frozenset(p + q), "cross") for p, q in tested
                     if frozenset(p + q) not in st.status]
        verdicts = (yield wave) if wave else {}
        nxt: list[tuple[list[str], list[str]]] = []
        for tested, rest in plans:
            hits = [(p, q) for p, q in tested
                    if verdicts.get(frozenset(p + q), st.status.get(frozenset(p + q)))]
            for p, q in hits:
                if len(p) == 1 and len(q) == 1:
                    st.faults.append(Fault("link", (p[0], q[0]), (
                        f"{_name(p + q)} degraded while each ran healthy in other groups",)))
                else:
                    nxt.append((p, q))
            if not hits:
                nxt += rest
        cells = nxt


def _pair(st: _State, pair: list[str]) -> _Inv:
    """A degraded pair: test each member with a different known-good node."""
    good = [n for n in st.good() if n not in pair]
    if len(good) < 2:
        st.faults.append(Fault("pair", tuple(pair), (
            f"{_name(pair)} degraded; no two known-good nodes to tell node from link",)))
        return
    a, b = pair
    # Parallel confirmations each take their own helpers when enough good nodes exist.
    free = [n for n in good if n not in st.claimed]
    ga, gb = (free if len(free) >= 2 else good)[:2]
    st.claimed |= {ga, gb}
    wave = [(frozenset((a, ga)), "confirm"), (frozenset((b, gb)), "confirm")]
    verdict = yield wave
    bad_a, bad_b = verdict[wave[0][0]], verdict[wave[1][0]]
    if bad_a and bad_b:
        # Both flagged: one may be a bad link to its helper instead. Swap the helpers.
        swap = [(frozenset((a, gb)), "confirm"), (frozenset((b, ga)), "confirm")]
        again = yield swap
        if not again[swap[0][0]]:
            st.faults.append(Fault("link", (a, ga), (f"{a}+{ga} degraded", f"{a}+{gb} healthy",
                                                     f"{b}+{ga} degraded")))
            bad_a = False
        elif not again[swap[1][0]]:
            st.faults.append(Fault("link", (b, gb), (f"{b}+{gb} degraded", f"{b}+{ga} healthy",
                                                     f"{a}+{gb} degraded")))
            bad_b = False
    for node, other, bad in ((a, ga, bad_a), (b, gb, bad_b)):
        if bad:
            st.faults.append(Fault("node", (node,), (
                f"{_name(pair)} degraded", f"{node}+{other} degraded ({other} is known good)")))
    if not bad_a and not bad_b:
        st.faults.append(Fault("link", (a, b), (
            f"{_name(pair)} degraded", f"{a}+{ga} healthy", f"{b}+{gb} healthy")))


def _together(invs: list[_Inv]) -> _Inv:
    """Run investigations side by side; each wave is the union of their wants. Confirmation
    helpers are chosen from known-good nodes, so two investigations may want the same
    helper: a clashing want waits for the next wave."""
    live: list[tuple[_Inv, Wave]] = []
    for inv in invs:
        first = next(inv, None)
        if first is not None:
            live.append((inv, first))
    while live:
        wave: list[tuple[Group, str]] = []
        used: set[str] = set()
        chosen: list[int] = []
        for i, (_, want) in enumerate(live):
            nodes = {n for g, _ in want for n in g}
            if nodes & used and chosen:
                continue
            used |= nodes
            wave += want
            chosen.append(i)
        verdicts = yield wave
        nxt: list[tuple[_Inv, Wave]] = []
        for i, (inv, want) in enumerate(live):
            if i not in chosen:
                nxt.append((inv, want))
                continue
            with contextlib.suppress(StopIteration):
                nxt.append((inv, inv.send({g: verdicts[g] for g, _ in want})))
        live = nxt


def _uncleared(st: _State, nodes: list[str]) -> bool:
    """True when some node or pair among `nodes` never ran in a healthy group."""
    healthy = [g for g, bad in st.status.items() if not bad]
    covered = {frozenset((a, b)) for g in healthy for a in g for b in g if a != b}
    return any(frozenset((a, b)) not in covered for i, a in enumerate(nodes)
               for b in nodes[i + 1:])


def _procedure(st: _State, nodes: list[str]) -> _Inv:
    whole = frozenset(nodes)
    if len(nodes) < 2:
        return
    absolute = st.judge.reference is not None
    if absolute:
        verdict = yield [(whole, "whole")]
        if not verdict[whole]:
            return
        yield from _split(st, nodes, True)
    else:
        yield [(whole, "whole")]
        yield from _split(st, nodes, False)
    for _ in range(MAX_VERIFICATIONS):
        if not st.faults:
            return
        rest = _remaining(st, nodes)
        if len(rest) < 2 or not _uncleared(st, rest):
            return
        group = frozenset(rest)
        found = len(st.faults)
        verdict = yield [(group, "verify")]
        if not verdict[group]:
            return
        yield from _split(st, rest, True)
        if len(st.faults) == found:
            return  # degraded but nothing new isolated: reported with the tests


def _remaining(st: _State, nodes: list[str]) -> list[str]:
    drop = {f.nodes[0] for f in st.faults if f.kind == "node"}
    drop |= {f.nodes[-1] for f in st.faults if f.kind in ("link", "pair")}
    return [n for n in nodes if n not in drop]


def advance(nodes: Sequence[str], results: Mapping[Group, float | None],
            judge: Judge) -> Wanted | Outcome:
    """The groups the next wave still needs, or the outcome once every fault is isolated.

    `results` maps every finished group to its TGS (None: the job failed)."""
    st = _State({n: i for i, n in enumerate(nodes)}, judge, results)
    proc = _procedure(st, list(nodes))
    try:
        wave = next(proc)
        while True:
            verdicts = _run_wave(st, wave)
            st.claimed.clear()
            wave = proc.send(verdicts)
    except StopIteration:
        pass
    except _NeedResults as need:
        return Wanted(need.missing, tuple(st.tests), st.waves)
    return Outcome(tuple(st.faults), tuple(st.tests), st.waves, judge.reference is not None)
