"""How many runs the model perf search needs, against three baselines (not a test).

    python bench/probe_efficiency.py [--curves N] [--seed S] [--noise F] [--holdout-seed H]

Ground truth: seeded synthetic clusters. Each has a TGS-vs-batch curve (five families, see
`_tgs`) and a memory model (`_memory`): compiled temp = c + s*b*(1 + q*(b/M - 1/2)) (a
constant part, a slope, a few % curvature), a fixed part F, a pool L and a runtime
headroom h the compiled-memory line does not show. A batch fits when F + temp + h <= L; M,
the largest that fits, is drawn from 4..64. A run OOMs above M, else it gives the true TGS
times fresh +-1% uniform noise. Every run prints what MaxText prints: the compiled-memory
line (GB to one decimal) and Memstats' pool; an OOM also names its failed allocation (the
shortfall plus up to one batch of temp).

The memory estimate is M x an error factor. The headline band draws it log-uniformly over
x0.2..5 (the SKILL.md formula ignores sharding and remat; sweepd's own default scenario has
it 2.8x low for llama2-70b); the old bands x0.85..1.15 ("memstats prior") and x0.6..1.5
("formula only") are reported separately. "Found" is judged against the best INTEGER batch
that fits (the true optimum), from the curve, not a grid.

A held-out set (another seed, two curve families and a memory curvature the search was
not tuned on) is reported on its own.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

# Runnable from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweepd.kinds.model_perf.search import Outcome, Probe, batch_space, best, next_probe

NOISE = 0.01
FOUND = 0.01  # = the noise: closer than this, single runs cannot tell two batches apart
MAX_RUNS = 12  # the spec's default max_runs
POOL_GB = 178.5  # 192 GiB x 0.93
ERROR = {"x0.2-5 log-uniform": (0.2, 5.0), "memstats prior x0.85-1.15": (0.85, 1.15),
         "formula only x0.6-1.5": (0.6, 1.5)}
BANDS = tuple(ERROR)
FAMILIES = ("saturating", "steep-to-cliff", "interior-peak", "plateau", "pressure-drop")
HOLDOUT_FAMILIES = ("power-rise", "kernel-switch")
DEFINITION = (
    "found (1%) = the batch a method reports (its highest measured TGS) has a TRUE TGS within "
    f"{FOUND:.0%} of the best TRUE TGS of any integer batch that fits; exact = it is that "
    "batch (or ties it)"
)


@dataclass(frozen=True)
class Memory:
    slope: float  # GB of temp per batch
    const: float  # temp's constant part
    curve: float  # curvature q
    fixed: float  # compiled total - temp (params, optimizer state, outputs)
    headroom: float  # outside the compiled program (RCCL, runtime): unseen by the line
    m: int  # the batch the slope was sized for

    def temp(self, b: int) -> float:
        return self.const + self.slope * b * (1 + self.curve * (b / self.m - 0.5))

    def fits(self, b: int) -> bool:
        return self.fixed + self.temp(b) + self.headroom <= POOL_GB


@dataclass(frozen=True)
class Curve:
    family: str
    max_fit: int  # largest batch that fits; every batch above it OOMs
    tgs: tuple[float, ...]  # true TGS of batch b at tgs[b - 1], b = 1..max_fit
    memory: Memory

    def true(self, b: int) -> float:
        return self.tgs[b - 1]

    @property
    def peak(self) -> float:
        return max(self.tgs)


def _memory(rng: random.Random, m: int, curvature: float) -> tuple[Memory, int]:
    fixed = rng.uniform(10, 100)
    headroom = rng.uniform(0, 0.02) * POOL_GB
    room = POOL_GB - fixed - headroom
    const = room * rng.uniform(0, 0.25)  # batch-independent temp (all-gather buffers etc.)
    q = rng.uniform(-curvature, curvature)
    slope = (room - const) / (m + rng.uniform(0, 1))
    mem = Memory(slope, const, q, fixed, headroom, m)
    fit = max(b for b in range(1, 4 * m + 2) if mem.fits(b) or b == 1)
    return mem, fit


def _tgs(rng: random.Random, family: str, m: int) -> list[float]:
    k = rng.uniform(0.5, 8.0)  # fixed per-step overhead in batch units: b / (b + k)

    def rise(b: float) -> float:
        return b / (b + k)

    if family == "saturating":  # diminishing returns all the way to the cliff
        return [rise(b) for b in range(1, m + 1)]
    if family == "steep-to-cliff":  # overhead-dominated: still rising >=1%/step at the cliff
        k = rng.uniform(0.5, 2.0) * m
        return [rise(b) for b in range(1, m + 1)]
    if family == "interior-peak":  # communication overhead makes TGS fall past a peak
        p = rng.randint(2, max(2, m - 1))
        fall = rng.uniform(0.005, 0.04)
        return [rise(min(b, p)) * (1 - fall * max(0, b - p)) for b in range(1, m + 1)]
    if family == "plateau":  # flat from q on, then possibly a decline before the cliff
        q = rng.randint(2, m)
        end = rng.randint(q, m)
        fall = rng.uniform(0.0, 0.03)
        return [rise(min(b, q)) * (1 - fall * max(0, b - end)) for b in range(1, m + 1)]
    if family == "pressure-drop":  # rising, then memory pressure costs 3-15% in the last 1-3
        drop_from = m - rng.randint(0, 2)
        drop = rng.uniform(0.03, 0.15)
        return [rise(b) * (1 - drop if b >= drop_from else 1.0) for b in range(1, m + 1)]
    if family == "power-rise":  # held out: b^a rise, smooth quadratic fall past a peak
        a = rng.uniform(0.15, 0.8)
        top = rng.uniform(0.3, 1.3) * m
        w = rng.uniform(0.0, 0.4)
        return [min(b, top) ** a * (1 - w * max(0.0, (b - top) / m) ** 2)
                for b in range(1, m + 1)]
    # held out, "kernel-switch": rising, with a 2-8% step down or up at a random batch
    s = rng.randint(2, m)
    step = rng.uniform(-0.08, 0.04)
    return [rise(b) * (1 + step if b >= s else 1.0) for b in range(1, m + 1)]


def make_curve(rng: random.Random, family: str, curvature: float = 0.03) -> Curve:
    mem, m = _memory(rng, rng.randint(4, 64), curvature)
    return Curve(family, m, tuple(_tgs(rng, family, m)), mem)


class Cluster:
    """Runs a batch: OOM above the cliff, else the true TGS with fresh noise; every run
    reports its compiled memory as MaxText prints it."""

    def __init__(self, curve: Curve, rng: random.Random, noise: float,
                 memory_line: bool = True) -> None:
        self.curve, self.rng, self.noise, self.runs = curve, rng, noise, 0
        self.memory_line = memory_line

    def run(self, b: int) -> Probe:
        self.runs += 1
        mem, tgs = self.curve.memory, self.rng.uniform(1 - self.noise, 1 + self.noise)
        line: dict[str, float | None] = {}
        if self.memory_line:
            line = {"temp_gb": round(mem.temp(b), 1), "fixed_gb": round(mem.fixed, 1),
                    "limit_gb": POOL_GB}
        if b > self.curve.max_fit:
            short = mem.fixed + mem.temp(b) + mem.headroom - POOL_GB
            alloc = short + self.rng.uniform(0, 1) * mem.slope
            return Probe(b, Outcome.OOM, None, alloc_gb=round(alloc, 2), **line)
        return Probe(b, Outcome.OK, self.curve.true(b) * tgs, **line)


def sweepd(cluster: Cluster, estimate: int) -> list[Probe]:
    space = batch_space(estimate)
    probes: list[Probe] = []
    while len(probes) < MAX_RUNS and (step := next_probe(space, probes)) is not None:
        assert isinstance(step.value, int)
        probes.append(cluster.run(step.value))
    return probes


def sweepd_prior(cluster: Cluster, estimate: int) -> list[Probe]:
    """A second sweep of the same cell: the first one (its own noise, not counted) gives
    the peak, the largest fit and the OOM above it, as perf_plan._from_prior uses them."""
    first = sweepd(Cluster(cluster.curve, random.Random(cluster.curve.max_fit), cluster.noise),
                   estimate)
    top = best(first)
    if top is None:
        return sweepd(cluster, estimate)
    fits = [int(p.value) for p in first if p.outcome is Outcome.OK]
    ooms = [int(p.value) for p in first if p.outcome is not Outcome.OK]
    space = batch_space(max(fits), upper=min(ooms) - 1 if ooms else None)
    space = replace(space, start=top.value, start_why="the prior sweep's peak",
                    prior=tuple(first))
    probes: list[Probe] = []
    while len(probes) < MAX_RUNS and (step := next_probe(space, probes)) is not None:
        assert isinstance(step.value, int)
        probes.append(cluster.run(step.value))
    return probes


def sweepd_no_line(cluster: Cluster, estimate: int) -> list[Probe]:
    cluster.memory_line = False
    return sweepd(cluster, estimate)


def linear_scan(cluster: Cluster, estimate: int) -> list[Probe]:
    """Every integer upward from 1 until the first OOM or the first TGS drop."""
    probes: list[Probe] = []
    for b in range(1, 4097):
        probe = cluster.run(b)
        probes.append(probe)
        top = best(probes[:-1])
        if probe.outcome is not Outcome.OK or (top and (probe.tgs or 0) < (top.tgs or 0)):
            break
    return probes


def power_binsearch(cluster: Cluster, estimate: int) -> list[Probe]:
    """Lightning BatchSizeFinder: double from 1 until OOM, bisect for the largest fit."""
    probes: list[Probe] = []
    b, lo = 1, 0
    while (probe := cluster.run(b)).outcome is Outcome.OK:
        probes.append(probe)
        lo, b = b, 2 * b
    probes.append(probe)
    hi = b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probes.append(probe := cluster.run(mid))
        lo, hi = (mid, hi) if probe.outcome is Outcome.OK else (lo, mid)
    return probes


def skill_literal(cluster: Cluster, estimate: int) -> list[Probe]:
    """batch-sweep.SKILL.md Steps 3 and 7 done literally: 75% of the estimate, then 1.5x
    the first; an OOM is an upper bound and the midpoint below it is next; a higher TGS goes
    higher (1.5x, or the midpoint below a known OOM); a lower or flat TGS ends the search."""
    probes: list[Probe] = []
    b = max(1, round(START * estimate))
    hi: int | None = None
    while len(probes) < MAX_RUNS:
        top = best(probes)
        probes.append(probe := cluster.run(b))
        if probe.outcome is not Outcome.OK:
            hi = b
            low = int(top.value) if top else 0
            b = (low + hi) // 2
        elif top is not None and (probe.tgs or 0) <= (top.tgs or 0):
            break  # "TGS lower or flat: the previous batch size was optimal"
        else:
            b = math.ceil(1.5 * b) if hi is None else (b + hi) // 2
        if b < 1 or b in {p.value for p in probes}:
            break
    return probes


START = 0.75


def exhaustive(cluster: Cluster, estimate: int) -> list[Probe]:
    """Reference ceiling, not a contender: every integer up to the first OOM."""
    probes: list[Probe] = []
    for b in range(1, 4097):
        probes.append(probe := cluster.run(b))
        if probe.outcome is not Outcome.OK:
            break
    return probes


Method = Callable[[Cluster, int], list[Probe]]
SWEEPD = "sweepd"
METHODS: dict[str, Method] = {
    SWEEPD: sweepd,
    "sweepd, no memory line": sweepd_no_line,
    "sweepd, after a prior sweep": sweepd_prior,
    "SKILL.md literal": skill_literal,
    "linear scan": linear_scan,
    "doubling + binsearch": power_binsearch,
    "exhaustive (noise ceiling)": exhaustive,
}


@dataclass(frozen=True)
class Case:
    curve: Curve
    band: str
    estimate: int


@dataclass(frozen=True)
class Result:
    runs: int
    found: bool  # true TGS within FOUND of the true integer optimum
    exact: bool  # the optimum itself (or a batch that ties it)


def evaluate(cases: Sequence[Case], seed: int, noise: float) -> dict[str, list[Result]]:
    """Each method's result per case; every method sees the same noise stream."""
    results: dict[str, list[Result]] = {}
    for name, method in METHODS.items():
        rng = random.Random(seed + 1)
        results[name] = []
        for case in cases:
            cluster = Cluster(case.curve, rng, noise)
            chosen = best(method(cluster, case.estimate))
            true = case.curve.true(int(chosen.value)) if chosen is not None else 0.0
            peak = case.curve.peak
            results[name].append(Result(cluster.runs, true >= (1 - FOUND) * peak,
                                        true >= peak * (1 - 1e-12)))
    return results


def workload(count: int, seed: int, families: Sequence[str] = FAMILIES,
             curvature: float = 0.03) -> list[Case]:
    """Curves cycle through the families; estimates cycle through the bands."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        curve = make_curve(rng, families[i % len(families)], curvature)
        band = BANDS[(i // len(families)) % len(BANDS)]
        lo, hi = ERROR[band]
        factor = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        cases.append(Case(curve, band, max(1, round(curve.max_fit * factor))))
    return cases


HEADER = (f"{'method':28} {'mean':>6} {'p95':>4} {'worst':>5} {'found 1%':>9} {'exact':>7}")


def row(name: str, results: Sequence[Result]) -> str:
    runs = sorted(r.runs for r in results)
    n = len(runs)
    return (f"{name:28} {statistics.mean(runs):6.2f} {runs[math.ceil(0.95 * n) - 1]:4d} "
            f"{runs[-1]:5d} {sum(r.found for r in results) / n:9.1%} "
            f"{sum(r.exact for r in results) / n:7.1%}")


def report(title: str, cases: Sequence[Case], results: dict[str, list[Result]]) -> None:
    for band in BANDS:
        keep = [c.band == band for c in cases]
        print(f"\n[{title}: estimate {band}, {sum(keep)} curves]\n{HEADER}")
        for name, rs in results.items():
            print(row(name, [r for r, k in zip(rs, keep, strict=True) if k]))
    print(f"\n{title}, sweepd by family (all bands): mean runs / p95 / found 1% / exact")
    for family in sorted({c.curve.family for c in cases}):
        rs = [r for c, r in zip(cases, results[SWEEPD], strict=True) if c.curve.family == family]
        runs = sorted(r.runs for r in rs)
        print(f"  {family:16} {statistics.mean(runs):5.2f} / "
              f"{runs[math.ceil(0.95 * len(runs)) - 1]} / "
              f"{sum(r.found for r in rs) / len(rs):6.1%} / "
              f"{sum(r.exact for r in rs) / len(rs):6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--holdout-seed", type=int, default=99173)
    parser.add_argument("--noise", type=float, default=NOISE)
    args = parser.parse_args()
    print(f"noise +-{args.noise:.2%} per measurement (uniform, fresh each run); "
          f"max_runs {MAX_RUNS}")
    print(DEFINITION)
    cases = workload(args.curves, args.seed)
    print(f"\ntuned set: {len(cases)} curves, seed {args.seed}, families {', '.join(FAMILIES)}")
    report("tuned", cases, evaluate(cases, args.seed, args.noise))
    held = workload(args.curves, args.holdout_seed, HOLDOUT_FAMILIES, curvature=0.08)
    print(f"\nheld-out set: {len(held)} curves, seed {args.holdout_seed}, families "
          f"{', '.join(HOLDOUT_FAMILIES)}, memory curvature up to 8%")
    report("held out", held, evaluate(held, args.holdout_seed, args.noise))


if __name__ == "__main__":
    main()
