"""Why one bad link can cost ⌈log2 N⌉+3 rounds: an exhaustive check of the search's end.

The cross search ends in a 2x2 cell {x1,x2} x {y1,y2} holding one bad link. Each degraded
diagonal on the way down left the cell's nodes with unproven pairs with the sibling sets of
that level (x1, x2 with the Y-side siblings px.., y1, y2 with the X-side ones), and those
must be proven before the verdict so that no second link can hide there. Siblings of one
level were proven together (their diagonal was healthy); siblings of different levels were
not. This tries every pair of waves (every partition of the cell and the siblings, the
second wave chosen per outcome of the first) and counts the schedules after which, whichever
of the 4 pairs is bad, the link is proven (the only unproven pair of a degraded job whose
nodes all ran healthy) and every other pair is proven or touches the link.

    python bench/isolation_endgame.py [--levels 2]     # about 7 minutes for 2 levels
    python bench/isolation_endgame.py --smoke          # levels 0-1, checked, under a second

Result: 0 degraded diagonals above the cell: 2 schedules (the two diagonals); 1: some;
2 or more: none. So once the descent has passed two degraded diagonals, its end takes a third
wave, whatever the two waves are.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator

Part = list[list[str]]
CANDIDATES = [("x1", "y1"), ("x1", "y2"), ("x2", "y1"), ("x2", "y2")]
CELL = ["x1", "x2", "y1", "y2"]


def partitions(items: list[str]) -> Iterator[Part]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in partitions(rest):
        yield [[first], *p]
        for i in range(len(p)):
            yield [*p[:i], [first, *p[i]], *p[i + 1:]]


def pairs(group: list[str]) -> set[tuple[str, str]]:
    return {(a, b) if a < b else (b, a) for a, b in itertools.combinations(group, 2)}


def finished(waves: list[Part], link: tuple[str, str], nodes: list[str],
             known: set[tuple[str, str]]) -> bool:
    def hit(g: list[str]) -> bool:
        return link[0] in g and link[1] in g
    proven = set(known)
    bad = [CELL]
    for wave in waves:
        for g in wave:
            if hit(g):
                bad.append(g)
            else:
                proven |= pairs(g)
    healthy = {n for wave in waves for g in wave if not hit(g) for n in g}
    named = any(set(g) <= healthy and pairs(g) - proven == {link} for g in bad)
    rest = pairs(nodes) - proven - {link}
    return named and all(set(p) & set(link) for p in rest)


def schedules(levels: int) -> int:
    xs = ["x1", "x2", *(f"px{i}" for i in range(levels))]
    ys = ["y1", "y2", *(f"py{i}" for i in range(levels))]
    nodes = xs + ys
    # Each side was proven clean on its own; each level's siblings ran healthy together.
    known = pairs(xs) | pairs(ys) | {(f"px{i}", f"py{i}") for i in range(levels)}
    waves = {tuple(sorted(tuple(sorted(g)) for g in p if len(g) >= 2)): [g for g in p
             if len(g) >= 2] for p in partitions(nodes)}
    options = [w for w in waves.values() if w]
    count = 0
    for first in options:
        classes: dict[tuple[int, ...], list[tuple[str, str]]] = {}
        for c in CANDIDATES:
            out = tuple(i for i, g in enumerate(first) if c[0] in g and c[1] in g)
            classes.setdefault(out, []).append(c)
        if all(any(all(finished([first, second], c, nodes, known) for c in cs)
                   for second in options) for cs in classes.values()):
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=2)
    parser.add_argument("--smoke", action="store_true",
                        help="levels 0-1 in under a second, checked against the known counts")
    args = parser.parse_args()
    levels = 1 if args.smoke else args.levels
    found = []
    for k in range(levels + 1):
        found.append(schedules(k))
        print(f"degraded diagonals above the cell: {k}: two-wave schedules that finish: "
              f"{found[-1]}", flush=True)
    # 0 levels: the cell's two diagonals; 1 level: some (8, measured when this was written).
    if args.smoke and found != [2, 8]:
        raise SystemExit(f"smoke: expected [2, 8] schedules, got {found}")


if __name__ == "__main__":
    main()
