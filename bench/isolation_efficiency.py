"""Network isolation efficiency: sweepd's group testing vs the SKILL.md's plain halving.

For N = 8, 16, 32, 64 simulated nodes and four cases (all healthy, one slow NIC, one bad
link, two faults), run the pure planner (`sweepd.kinds.network.isolation.advance`) against a
pure TGS model (no subprocesses): a group runs at 0.9x when it holds a slow NIC or both ends
of a bad link, x0.97 per doubling of nodes, with +-0.3% noise. Prints jobs, rounds (parallel
waves), node-hours to a verdict and verdict accuracy, side by side.

Every single fault is run; every pair of faults that share no node up to N=16 (7,260 at
N=16), a sample of pairs above. About 5 minutes.

    python bench/isolation_efficiency.py [--seed 1] [--samples 300] [--every-pair-up-to 16]
                                         [--smoke]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweepd.kinds.network.isolation import advance
from sweepd.kinds.network.judge import Group, Judge, Outcome

BASE_TGS = 1400.0
SCALING = 0.97
FAULT_FACTOR = 0.9
NOISE = 0.003
JOB_HOURS = 900 / 3600     # a 15-step llama2-70b job (docs/scenario.md)

Faults = tuple[frozenset[str], frozenset[frozenset[str]]]   # bad nodes, bad links


@dataclass(frozen=True)
class Result:
    jobs: int
    rounds: int
    node_hours: float
    exact: bool        # every bad node and bad link named, nothing else
    localized: bool    # every fault at least inside a reported group of <= 2 nodes


def tgs_model(faults: Faults, rng: random.Random) -> Callable[[Group], float]:
    bad_nodes, bad_links = faults

    def tgs(group: Group) -> float:
        hit = bool(group & bad_nodes) or any(link <= group for link in bad_links)
        noise = 1 + rng.gauss(0, NOISE)
        return float(BASE_TGS * SCALING ** math.log2(len(group)) * (FAULT_FACTOR if hit else 1)
                     * noise)

    return tgs


def sweepd_run(nodes: Sequence[str], faults: Faults, rng: random.Random) -> Result:
    measure = tgs_model(faults, rng)
    results: dict[Group, float | None] = {}
    judge = Judge(reference=BASE_TGS, scaling=SCALING)
    while True:
        step = advance(nodes, results, judge)
        if isinstance(step, Outcome):
            break
        for group, _ in step.groups:
            results[group] = measure(group)
    got_nodes = frozenset(f.nodes[0] for f in step.faults if f.kind == "node")
    got_links = frozenset(frozenset(f.nodes) for f in step.faults if f.kind == "link")
    exact = (got_nodes, got_links) == faults and all(f.kind != "pair" for f in step.faults)
    reported = [frozenset(f.nodes) for f in step.faults if len(f.nodes) <= 2]
    truth = [frozenset([n]) for n in faults[0]] + list(faults[1])
    local = all(any(t <= r for r in reported) for t in truth) and (bool(truth) or not reported)
    return Result(len(step.tests), step.rounds,
                  sum(len(t.group) for t in step.tests) * JOB_HOURS, exact, local)


def skill_run(nodes: Sequence[str], faults: Faults, rng: random.Random) -> Result:
    """batch-sweep.SKILL.md: whole group, then halve degraded groups down to a pair. Both
    halves healthy or both degraded: stop and report. A degraded pair is the answer."""
    measure = tgs_model(faults, rng)
    jobs = rounds = 0
    node_hours = 0.0

    def degraded(group: Sequence[str]) -> bool:
        nonlocal jobs, node_hours
        jobs += 1
        node_hours += len(group) * JOB_HOURS
        expected = float(BASE_TGS * SCALING ** math.log2(len(group)))
        return measure(frozenset(group)) < expected * 0.95

    rounds = 1
    group = list(nodes)
    if not degraded(group):
        return Result(jobs, rounds, node_hours, not any(faults), not any(faults))
    while len(group) > 2:
        mid = len(group) // 2
        rounds += 1
        a, b = group[:mid], group[mid:]
        bad = [h for h in (a, b) if degraded(h)]
        if len(bad) != 1:
            return Result(jobs, rounds, node_hours, False, False)  # "report to user"
        group = bad[0]
    pair = frozenset(group)
    bad_nodes, bad_links = faults
    localized = (len(bad_nodes) + len(bad_links) == 1 and
                 ((bad_nodes <= pair and bool(bad_nodes)) or any(lk == pair for lk in bad_links)))
    return Result(jobs, rounds, node_hours, False, localized)  # a pair cannot tell node/link


def two_fault_cases(nodes: Sequence[str]) -> list[Faults]:
    """Every pair of faults that share no node: two NICs, a NIC and a link, two links."""
    faults = [frozenset([n]) for n in nodes] + [frozenset(p) for p in
                                                 itertools.combinations(nodes, 2)]
    return [(frozenset(n for f in (a, b) if len(f) == 1 for n in f),
             frozenset(f for f in (a, b) if len(f) == 2))
            for a, b in itertools.combinations(faults, 2) if not a & b]


def cases(nodes: Sequence[str], rng: random.Random, samples: int,
          every_pair_up_to: int) -> dict[str, list[Faults]]:
    """Every single fault; every pair of faults up to `every_pair_up_to` nodes, else a sample
    (NIC+NIC, NIC+link, link+link in turn)."""
    none: frozenset[frozenset[str]] = frozenset()
    links = [frozenset(p) for p in itertools.combinations(nodes, 2)]
    if len(nodes) <= every_pair_up_to:
        two = two_fault_cases(nodes)
    else:
        two = []
        for i in range(samples):
            kind = i % 3
            if kind == 0:
                two.append((frozenset(rng.sample(list(nodes), 2)), none))
            elif kind == 1:
                x = rng.choice(list(nodes))
                link = frozenset(rng.sample([n for n in nodes if n != x], 2))
                two.append((frozenset([x]), frozenset([link])))
            else:
                a, b, c, d = rng.sample(list(nodes), 4)
                two.append((frozenset(), frozenset([frozenset((a, b)), frozenset((c, d))])))
    return {"all healthy": [(frozenset(), none)],
            "one slow NIC": [(frozenset([n]), none) for n in nodes],
            "one bad link": [(frozenset(), frozenset([lk])) for lk in links],
            "two faults": two}


def summarize(results: list[Result]) -> str:
    n = len(results)
    jobs = sum(r.jobs for r in results) / n
    rounds = sum(r.rounds for r in results) / n
    hours = sum(r.node_hours for r in results) / n
    exact = 100 * sum(r.exact for r in results) / n
    near = 100 * sum(r.localized for r in results) / n
    return (f"{jobs:5.1f} {max(r.jobs for r in results):4d} {rounds:4.1f} "
            f"{max(r.rounds for r in results):3d} {hours:6.1f} {exact:5.0f}% {near:5.0f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--samples", type=int, default=300,
                        help="two-fault cases drawn where not every pair is run")
    parser.add_argument("--every-pair-up-to", type=int, default=16,
                        help="run every two-fault case up to this many nodes")
    parser.add_argument("--smoke", action="store_true",
                        help="N=8 and 20 sampled two-fault cases: seconds")
    args = parser.parse_args()
    if args.smoke:
        args.samples, args.every_pair_up_to = 20, 0
    rng = random.Random(args.seed)
    head = "jobs  max rnds max n-h   exact  local"
    print(f"{'N':>3} {'case':<13} {'cases':>5} {'budget':>6} | sweepd: {head} | "
          f"SKILL.md: {head}")
    for n in (8,) if args.smoke else (8, 16, 32, 64):
        nodes = [f"n{i:03d}" for i in range(n)]
        budget = math.ceil(math.log2(n)) + 2
        for name, faults in cases(nodes, rng, args.samples, args.every_pair_up_to).items():
            ours = [sweepd_run(nodes, f, rng) for f in faults]
            theirs = [skill_run(nodes, f, rng) for f in faults]
            print(f"{n:>3} {name:<13} {len(faults):>5} {budget:>6} | {summarize(ours):>45} | "
                  f"{summarize(theirs):>45}")


if __name__ == "__main__":
    main()
