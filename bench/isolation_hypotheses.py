"""A reference point for the network planner: hypothesis elimination over at most two faults.

The network sweep's planner (`sweepd/kinds/network/isolation.py`) proves its verdict: it assumes
nothing about how many faults there are. This benchmark asks what assuming "at most two
faults, sharing no node" would buy. The truth is one of every such hypothesis (healthy, one
slow NIC, one bad link, two faults); a round is a set of disjoint jobs of >= 2 nodes, and a
job is degraded iff it holds a slow NIC or both ends of a bad link. Each round is chosen by a
one-step rule (fewest hypotheses left on average: the smallest sum of squared outcome-class
sizes), found by local search (move or swap nodes) from a few random partitions; the planner
is done when one hypothesis is left. Every hypothesis is run, so the maxima are true worst
cases of this planner. N=8 takes seconds, N=16 several minutes.

    python bench/isolation_hypotheses.py [--nodes 8] [--whole-first] [--seed 0] [--smoke]
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
IDLE = -1


@dataclass(frozen=True)
class Space:
    """Faults and hypotheses as arrays. Fault f < n is node f's NIC; above, a link
    (ends[f, 0], ends[f, 1]). A hypothesis is a pair of faults; `none` marks a missing one."""

    n: int
    ends: Ints          # fault -> its two nodes (a NIC repeats its node)
    nic: npt.NDArray[np.bool_]
    first: Ints         # hypothesis -> fault or none
    second: Ints

    @property
    def none(self) -> int:
        return len(self.ends)

    def category(self, h: int) -> str:
        a, b = int(self.first[h]), int(self.second[h])
        if a == self.none:
            return "all healthy"
        if b == self.none:
            return "one slow NIC" if a < self.n else "one bad link"
        return "two faults"


def space(n: int) -> Space:
    faults = [(i, i) for i in range(n)] + list(itertools.combinations(range(n), 2))
    first, second = [len(faults)], [len(faults)]
    first += range(len(faults))
    second += [len(faults)] * len(faults)
    for a, b in itertools.combinations(range(len(faults)), 2):
        if not set(faults[a]) & set(faults[b]):
            first.append(a)
            second.append(b)
    return Space(n, np.array(faults, dtype=np.int64),
                 np.array([x == y for x, y in faults], dtype=np.bool_),
                 np.array(first, dtype=np.int64), np.array(second, dtype=np.int64))


def outcome_keys(sp: Space, hyps: Ints, groups: list[int]) -> Ints:
    """One key per hypothesis: which jobs of the round it makes degraded (at most two)."""
    g = np.array(groups, dtype=np.int64)
    ga, gb = g[sp.ends[:, 0]], g[sp.ends[:, 1]]
    seen = np.where(sp.nic | (ga == gb), ga, IDLE)        # the job a fault degrades, or none
    seen = np.append(seen, IDLE)                          # the missing fault degrades nothing
    x, y = seen[sp.first[hyps]], seen[sp.second[hyps]]
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    width = sp.n + 2
    keys: Ints = np.where((lo == IDLE) | (lo == hi), hi + 1, (lo + 1) * width + hi + 1)
    return keys


def score(sp: Space, hyps: Ints, groups: list[int]) -> tuple[float, int]:
    _, counts = np.unique(outcome_keys(sp, hyps, groups), return_counts=True)
    return float((counts.astype(np.float64) ** 2).sum()), int(counts.max())


def valid(groups: list[int]) -> bool:
    sizes = [groups.count(j) for j in set(groups) if j != IDLE]
    return bool(sizes) and min(sizes) >= 2


def canonical(groups: list[int]) -> list[int]:
    names: dict[int, int] = {}
    return [IDLE if j == IDLE else names.setdefault(j, len(names)) for j in groups]


def local_search(sp: Space, hyps: Ints, groups: list[int], rng: random.Random) -> \
        tuple[tuple[float, int], list[int]]:
    best = score(sp, hyps, groups)
    improved = True
    while improved:
        improved = False
        jobs = max(groups) + 1
        moves: list[list[int]] = []
        for v in range(sp.n):
            for j in [*range(jobs + 1), IDLE]:
                if j != groups[v]:
                    moved = list(groups)
                    moved[v] = j
                    moves.append(moved)
        for v, w in itertools.combinations(range(sp.n), 2):
            if groups[v] != groups[w]:
                swapped = list(groups)
                swapped[v], swapped[w] = groups[w], groups[v]
                moves.append(swapped)
        rng.shuffle(moves)
        for candidate in moves:
            if not valid(candidate):
                continue
            candidate = canonical(candidate)
            s = score(sp, hyps, candidate)
            if s < best:
                best, groups, improved = s, candidate, True
                break
    return best, groups


def choose(sp: Space, hyps: Ints, rng: random.Random, starts: int = 6) -> list[int]:
    best: tuple[tuple[float, int], list[int]] | None = None
    for _ in range(starts):
        jobs = rng.choice([2, 3, 4, max(2, sp.n // 4), max(2, sp.n // 2)])
        order = list(range(sp.n))
        rng.shuffle(order)
        groups = [0] * sp.n
        for i, v in enumerate(order):
            groups[v] = i % jobs
        found = local_search(sp, hyps, groups, rng)
        if best is None or found[0] < best[0]:
            best = found
    assert best is not None
    return best[1]


def rounds_per_hypothesis(sp: Space, whole_first: bool, rng: random.Random) -> dict[int, int]:
    out: dict[int, int] = {}
    stack: list[tuple[Ints, int]] = [(np.arange(len(sp.first), dtype=np.int64), 0)]
    while stack:
        hyps, depth = stack.pop()
        if len(hyps) == 1:
            out[int(hyps[0])] = depth
            continue
        groups = [0] * sp.n if whole_first and depth == 0 else choose(sp, hyps, rng)
        keys = outcome_keys(sp, hyps, groups)
        for key in np.unique(keys):
            rest = hyps[keys == key]
            assert len(rest) < len(hyps) or depth == 0, "a round that tells nothing apart"
            stack.append((rest, depth + 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--whole-first", action="store_true",
                        help="open with one job on all nodes, as the network sweep does")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="N=4 in about a second")
    args = parser.parse_args()
    sp = space(4 if args.smoke else args.nodes)
    depths = rounds_per_hypothesis(sp, args.whole_first, random.Random(args.seed))
    if len(depths) != len(sp.first):
        raise SystemExit(f"{len(sp.first) - len(depths)} hypotheses never told apart")
    by_case: dict[str, list[int]] = defaultdict(list)
    for h, rounds in depths.items():
        by_case[sp.category(h)].append(rounds)
    print(f"N={sp.n} {'whole group first' if args.whole_first else 'free first round'}"
          f", {len(depths)} hypotheses")
    for case in ("all healthy", "one slow NIC", "one bad link", "two faults"):
        got = by_case[case]
        print(f"  {case:<13} {len(got):>5} cases  rounds mean {np.mean(got):4.2f} max {max(got)}")


if __name__ == "__main__":
    main()
