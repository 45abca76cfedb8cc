"""How many runs the model perf search needs, against two baselines (not a test).

    python bench/probe_efficiency.py [--curves N] [--seed S] [--noise F]

Ground truth: seeded synthetic TGS-vs-batch curves with an OOM cliff (largest batch that
fits, M, drawn from 4..64) in five families (see `_curve`). Every measurement gets fresh
+-1% multiplicative noise (uniform). Each curve gets a memory estimate of M x an error drawn
from one of two populations (`ERROR`), and every method searches the same grid,
`batch_space(estimate)`; "found" is judged against the best batch on that grid.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Runnable from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.kinds.model_perf.search import Outcome, Probe, batch_space, best, next_value

NOISE = 0.01
FOUND = 0.01  # = the noise: closer than this, single runs cannot tell two batches apart
# Estimate error bands, as multipliers on the true max batch. ASSUMED, not measured: with a
# prior run's Memstats only the activation formula is left to err; from the formula alone
# the parameter memory estimate errs too.
ERROR = {"memstats prior": (0.85, 1.15), "formula only": (0.6, 1.5)}
POPULATIONS = tuple(ERROR)
DEFINITION = (
    "found (1%) = the batch the method reports (its highest measured TGS) has a TRUE TGS within "
    f"{FOUND:.0%} of the best TRUE TGS among grid batches that fit (the grid peak); found 0.5% "
    "= within 0.5%; exact = it is the grid peak itself"
)


@dataclass(frozen=True)
class Curve:
    family: str
    max_fit: int  # largest batch that fits; every batch above it OOMs
    tgs: tuple[float, ...]  # true TGS of batch b at tgs[b - 1], b = 1..max_fit

    def true(self, b: int) -> float:
        return self.tgs[b - 1]

    @property
    def peak(self) -> float:
        return max(self.tgs)


def _curve(rng: random.Random, family: str) -> Curve:
    m = rng.randint(4, 64)
    k = rng.uniform(0.5, 8.0)  # fixed per-step overhead in batch units: b / (b + k)

    def rise(b: float) -> float:
        return b / (b + k)

    if family == "saturating":  # diminishing returns all the way to the cliff
        values = [rise(b) for b in range(1, m + 1)]
    elif family == "steep-to-cliff":  # overhead-dominated: still rising >=1%/step at the cliff
        k = rng.uniform(0.5, 2.0) * m
        values = [rise(b) for b in range(1, m + 1)]
    elif family == "interior-peak":  # communication overhead makes TGS fall past a peak
        p = rng.randint(2, m - 1)
        fall = rng.uniform(0.005, 0.04)
        values = [rise(min(b, p)) * (1 - fall * max(0, b - p)) for b in range(1, m + 1)]
    elif family == "plateau":  # flat from q on, then possibly a decline before the cliff
        q = rng.randint(2, m)
        end = rng.randint(q, m)
        fall = rng.uniform(0.0, 0.03)
        values = [rise(min(b, q)) * (1 - fall * max(0, b - end)) for b in range(1, m + 1)]
    else:  # "pressure-drop": rising, then memory pressure costs 3-15% in the last 1-3 batches
        drop_from = m - rng.randint(0, 2)
        drop = rng.uniform(0.03, 0.15)
        values = [rise(b) * (1 - drop if b >= drop_from else 1.0) for b in range(1, m + 1)]
    return Curve(family, m, tuple(values))


FAMILIES = ("saturating", "steep-to-cliff", "interior-peak", "plateau", "pressure-drop")


class Cluster:
    """Runs a batch: OOM above the cliff, else the true TGS with fresh noise."""

    def __init__(self, curve: Curve, rng: random.Random, noise: float) -> None:
        self.curve, self.rng, self.noise, self.runs = curve, rng, noise, 0

    def run(self, b: int) -> Probe:
        self.runs += 1
        if b > self.curve.max_fit:
            return Probe(b, Outcome.OOM, None)
        return Probe(b, Outcome.OK,
                     self.curve.true(b) * self.rng.uniform(1 - self.noise, 1 + self.noise))


def strategy(cluster: Cluster, grid: tuple[int, ...], estimate: int) -> list[Probe]:
    space = batch_space(estimate)
    assert space.candidates == grid  # the same grid the baselines search
    probes: list[Probe] = []
    while (value := next_value(space, probes)) is not None:
        assert isinstance(value, int)
        probes.append(cluster.run(value))
    return probes


def linear_scan(cluster: Cluster, grid: tuple[int, ...], estimate: int) -> list[Probe]:
    """Grid values upward from the smallest until the first OOM or the first TGS drop."""
    probes: list[Probe] = []
    for b in grid:
        probe = cluster.run(b)
        probes.append(probe)
        top = best(probes[:-1])
        if probe.outcome is not Outcome.OK or (top and (probe.tgs or 0) < (top.tgs or 0)):
            break
    return probes


def power_binsearch(cluster: Cluster, grid: tuple[int, ...], estimate: int) -> list[Probe]:
    """Lightning BatchSizeFinder on the grid: double until OOM, bisect for the largest fit."""
    probes: list[Probe] = []
    lo, i = -1, 0  # lo: highest grid index known to fit
    while i < len(grid) and (probe := cluster.run(grid[i])).outcome is Outcome.OK:
        probes.append(probe)
        lo = i
        i = next((j for j in range(i + 1, len(grid)) if grid[j] >= 2 * grid[i]), len(grid) - 1) \
            if i < len(grid) - 1 else len(grid)
    if i < len(grid):
        probes.append(probe)
    hi = i  # OOMs, or len(grid) when the whole grid fits
    while hi - lo > 1 and hi < len(grid):
        mid = (lo + hi) // 2
        probe = cluster.run(grid[mid])
        probes.append(probe)
        lo, hi = (mid, hi) if probe.outcome is Outcome.OK else (lo, mid)
    return probes


def exhaustive(cluster: Cluster, grid: tuple[int, ...], estimate: int) -> list[Probe]:
    """Reference ceiling, not a contender: every grid value up to the first OOM."""
    probes: list[Probe] = []
    for b in grid:
        probes.append(probe := cluster.run(b))
        if probe.outcome is not Outcome.OK:
            break
    return probes


Method = Callable[[Cluster, tuple[int, ...], int], list[Probe]]
SWEEPD = "upper-bound probe (sweepd)"
METHODS: dict[str, Method] = {
    SWEEPD: strategy,
    "linear scan": linear_scan,
    "power + binsearch": power_binsearch,
    "exhaustive (noise ceiling)": exhaustive,
}


@dataclass(frozen=True)
class Case:
    curve: Curve
    population: str  # which estimate error band the estimate came from
    estimate: int

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(int(v) for v in batch_space(self.estimate).candidates)

    @property
    def grid_peak(self) -> float:
        return max(self.curve.true(b) for b in self.grid if b <= self.curve.max_fit)


@dataclass(frozen=True)
class Result:
    runs: int
    found: bool  # true TGS within FOUND of the grid peak
    found_half: bool  # within FOUND / 2
    exact: bool  # the grid peak itself


def row(name: str, results: Sequence[Result]) -> str:
    n, runs = len(results), [r.runs for r in results]
    share = {k: sum(getattr(r, k) for r in results) / n for k in ("found", "found_half", "exact")}
    return (f"{name:28} {statistics.mean(runs):9.2f} {max(runs):5d} {share['found']:10.1%} "
            f"{share['found_half']:10.1%} {share['exact']:6.1%}")


HEADER = (f"{'method':28} {'mean runs':>9} {'worst':>5} {'found (1%)':>10} {'found 0.5%':>10} "
          f"{'exact':>6}")


def evaluate(cases: Sequence[Case], seed: int, noise: float) -> dict[str, list[Result]]:
    """Each method's result per case; every method sees the same noise stream."""
    results: dict[str, list[Result]] = {}
    for name, method in METHODS.items():
        rng = random.Random(seed + 1)
        results[name] = []
        for case in cases:
            cluster = Cluster(case.curve, rng, noise)
            chosen = best(method(cluster, case.grid, case.estimate))
            true = case.curve.true(int(chosen.value)) if chosen is not None else 0.0
            peak = case.grid_peak
            results[name].append(Result(cluster.runs, true >= (1 - FOUND) * peak,
                                        true >= (1 - FOUND / 2) * peak, true == peak))
    return results


def workload(count: int, seed: int) -> list[Case]:
    """Curves cycle through the families; estimates alternate between the populations."""
    rng = random.Random(seed)
    curves = [_curve(rng, FAMILIES[i % len(FAMILIES)]) for i in range(count)]
    cases = []
    for i, c in enumerate(curves):
        population = POPULATIONS[(i // len(FAMILIES)) % len(POPULATIONS)]
        lo, hi = ERROR[population]
        cases.append(Case(c, population, max(1, round(c.max_fit * rng.uniform(lo, hi)))))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--noise", type=float, default=NOISE)
    args = parser.parse_args()
    cases = workload(args.curves, args.seed)
    print(f"{len(cases)} curves, seed {args.seed}, families: {', '.join(FAMILIES)}")
    print(f"noise +-{args.noise:.0%} per measurement (uniform, fresh each run)")
    for population, (lo, hi) in ERROR.items():
        n = sum(c.population == population for c in cases)
        print(f"estimate '{population}': true max batch x U({lo}, {hi}), {n} curves")
    print("grid: every method searches batch_space(estimate).candidates "
          "(power-of-two step ~estimate/4 up to 2x estimate, plus powers of two below)")
    print(DEFINITION)
    grid_cost(cases)
    results = evaluate(cases, args.seed, args.noise)
    for title in ("mix", *POPULATIONS):
        keep = [title in ("mix", c.population) for c in cases]
        print(f"\n[{title}]\n{HEADER}")
        for name, rs in results.items():
            print(row(name, [r for r, k in zip(rs, keep, strict=True) if k]))
    by_family(cases, results[SWEEPD])


def grid_cost(cases: Sequence[Case]) -> None:
    """What searching a grid gives up against trying every integer batch that fits."""
    loss = sorted(1 - c.grid_peak / c.curve.peak for c in cases)
    print("grid cost (true TGS the best grid batch gives up against the best integer batch): "
          f"mean {statistics.mean(loss):.2%}, p95 {loss[int(0.95 * len(loss))]:.2%}, "
          f"max {loss[-1]:.2%}, "
          f"over 1% in {sum(x > 0.01 for x in loss) / len(loss):.1%} of curves")


def by_family(cases: Sequence[Case], results: Sequence[Result]) -> None:
    print("\nsweepd by curve family, mean runs / found (1%): mix | memstats prior | formula only")
    for family in FAMILIES:
        cells = []
        for population in ("mix", *POPULATIONS):
            rs = [r for c, r in zip(cases, results, strict=True) if c.curve.family == family
                  and population in ("mix", c.population)]
            cells.append(f"{statistics.mean(r.runs for r in rs):4.2f} / "
                         f"{sum(r.found for r in rs) / len(rs):6.1%}")
        print(f"  {family:16} " + " | ".join(cells))


if __name__ == "__main__":
    main()
