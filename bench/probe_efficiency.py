"""How many runs the model perf search needs, against two baselines (not a test).

    python bench/probe_efficiency.py [--curves N] [--seed S]

Ground truth: seeded synthetic TGS-vs-batch curves with an OOM cliff (largest batch that
fits, M, drawn from 4..64) in five families (see `_curve`). Every measurement gets fresh
+-1% multiplicative noise (uniform). The strategy gets a memory estimate of M x U(0.6, 1.5).
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

from sweepd.strategies.model_perf import Outcome, Probe, batch_space, best, next_value

NOISE = 0.01
TOLERANCE = 0.005
DEFINITION = (
    "found the true peak = the batch the method reports (its highest measured TGS) has a TRUE "
    f"TGS within {TOLERANCE:.1%} of the true maximum TGS over all batches that fit "
    "(exact argmax shown separately)"
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

    def __init__(self, curve: Curve, rng: random.Random) -> None:
        self.curve, self.rng, self.runs = curve, rng, 0

    def run(self, b: int) -> Probe:
        self.runs += 1
        if b > self.curve.max_fit:
            return Probe(b, Outcome.OOM, None)
        return Probe(b, Outcome.OK, self.curve.true(b) * self.rng.uniform(1 - NOISE, 1 + NOISE))


def strategy(cluster: Cluster, estimate: int) -> list[Probe]:
    space = batch_space(estimate)
    probes: list[Probe] = []
    while (value := next_value(space, probes)) is not None:
        assert isinstance(value, int)
        probes.append(cluster.run(value))
    return probes


def linear_scan(cluster: Cluster, estimate: int) -> list[Probe]:
    """1, 2, 3, ... until the first OOM or the first TGS below the best so far."""
    probes: list[Probe] = []
    b = 1
    while True:
        probe = cluster.run(b)
        probes.append(probe)
        top = best(probes[:-1])
        if probe.outcome is not Outcome.OK or (top and (probe.tgs or 0) < (top.tgs or 0)):
            return probes
        b += 1


def power_binsearch(cluster: Cluster, estimate: int) -> list[Probe]:
    """Lightning BatchSizeFinder: double from 1 until OOM, then bisect for the largest fit."""
    probes: list[Probe] = []
    b = 1
    while (probe := cluster.run(b)).outcome is Outcome.OK:
        probes.append(probe)
        b *= 2
    probes.append(probe)
    lo, hi = b // 2, b  # lo fits (0 if even batch 1 OOMs), hi OOMs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probe = cluster.run(mid)
        probes.append(probe)
        lo, hi = (mid, hi) if probe.outcome is Outcome.OK else (lo, mid)
    return probes


def exhaustive(cluster: Cluster, estimate: int) -> list[Probe]:
    """Reference ceiling, not a contender: every batch from 1 up to the first OOM."""
    probes: list[Probe] = []
    b = 1
    while (probe := cluster.run(b)).outcome is Outcome.OK:
        probes.append(probe)
        b += 1
    return [*probes, probe]


Method = Callable[[Cluster, int], list[Probe]]
SWEEPD = "upper-bound probe (sweepd)"
METHODS: dict[str, Method] = {
    SWEEPD: strategy,
    "linear scan": linear_scan,
    "power + binsearch": power_binsearch,
    "exhaustive (noise ceiling)": exhaustive,
}


@dataclass
class Tally:
    runs: list[int]
    found: int = 0
    exact: int = 0


def evaluate(curves: Sequence[Curve], estimates: Sequence[int], seed: int) -> dict[str, Tally]:
    tallies = {name: Tally([]) for name in METHODS}
    for name, method in METHODS.items():
        rng = random.Random(seed + 1)  # same noise stream for every method
        for curve, estimate in zip(curves, estimates, strict=True):
            cluster = Cluster(curve, rng)
            chosen = best(method(cluster, estimate))
            tally = tallies[name]
            tally.runs.append(cluster.runs)
            if chosen is not None:
                b = int(chosen.value)
                tally.found += curve.true(b) >= (1 - TOLERANCE) * curve.peak
                tally.exact += curve.true(b) == curve.peak
    return tallies


def workload(count: int, seed: int) -> tuple[list[Curve], list[int]]:
    rng = random.Random(seed)
    curves = [_curve(rng, FAMILIES[i % len(FAMILIES)]) for i in range(count)]
    estimates = [max(1, round(c.max_fit * rng.uniform(0.6, 1.5))) for c in curves]
    return curves, estimates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    curves, estimates = workload(args.curves, args.seed)
    print(f"{len(curves)} curves, seed {args.seed}, families: {', '.join(FAMILIES)}")
    print(f"noise +-{NOISE:.0%} per measurement, estimate = true max batch x U(0.6, 1.5)")
    print(DEFINITION)
    print(f"{'method':28} {'mean runs':>9} {'worst':>5} {'found peak':>10} {'exact':>6}")
    for name, t in evaluate(curves, estimates, args.seed).items():
        n = len(t.runs)
        print(f"{name:28} {statistics.mean(t.runs):9.2f} {max(t.runs):5d} "
              f"{t.found / n:10.1%} {t.exact / n:6.1%}")
    by_family(curves, estimates, args.seed)


def by_family(curves: Sequence[Curve], estimates: Sequence[int], seed: int) -> None:
    print("\nsweepd strategy by curve family:")
    for family in FAMILIES:
        pairs = [(c, e) for c, e in zip(curves, estimates, strict=True) if c.family == family]
        t = evaluate([c for c, _ in pairs], [e for _, e in pairs], seed)[SWEEPD]
        print(f"  {family:16} mean runs {statistics.mean(t.runs):5.2f}  worst {max(t.runs):3d}  "
              f"found {t.found / len(t.runs):6.1%}")


if __name__ == "__main__":
    main()
