"""Runs against exactness for variants of the model perf search (not a test).

    python bench/probe_tradeoffs.py [--curves N] [--seed S] [--holdout-seed H] [--noise F]
    python bench/probe_tradeoffs.py --where     # where the shipped search's runs go

The same clusters, noise stream and definitions as `bench/probe_efficiency.py` (estimate
errors x0.2-5 only). Each row changes one thing and is measured on the tuned and the
held-out set; docs/benchmarks.md keeps the table and says why none was kept. Variants that
change the search patch its module for the run: experiments, not the shipped search.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_efficiency as pe

import sweepd.kinds.model_perf.search as mp
import sweepd.kinds.model_perf.search.bounds as mp_bounds
import sweepd.kinds.model_perf.search.choose as mp_choose
import sweepd.kinds.model_perf.search.memory as mp_memory
import sweepd.kinds.model_perf.search.shapes as mp_shapes
import sweepd.kinds.model_perf.search.space as mp_space
import sweepd.kinds.model_perf.search.view as mp_view
from sweepd.kinds.model_perf.search import Outcome, Probe, best

# The search's modules: a constant or a rule is patched wherever a module holds it (each
# module that imported a name holds its own binding).
MODULES = (mp, mp_bounds, mp_choose, mp_memory, mp_shapes, mp_space, mp_view)

BAND = pe.BANDS[0]  # x0.2-5 log-uniform
Chooser = Callable[[Sequence[Probe]], Probe | None]


FIT_WINDOW = 0.03  # the fitted curve goes through the runs this close to the highest TGS
CHOICE_NOISE = 0.02  # ... and chooses among runs this close (two noise widths)


def choose(probes: Sequence[Probe]) -> Probe | None:
    """Report by a fitted curve: among the runs within two noise widths of the highest
    measurement, the one a concave quadratic (least squares through the runs within 3% of
    the highest, at least three) rates highest; the highest measurement when there is
    nothing to fit (fewer than three values, or no downward bend)."""
    top = best(probes)
    if top is None or not top.tgs:
        return top
    cliff = min((int(p.value) for p in probes if p.outcome is not Outcome.OK), default=1 << 30)
    runs = {int(p.value): p for p in probes
            if p.outcome is Outcome.OK and p.tgs is not None and int(p.value) < cliff}
    near = [b for b, p in runs.items() if (p.tgs or 0.0) >= (1 - FIT_WINDOW) * top.tgs]
    rest = sorted((b for b in runs if b not in near), key=lambda b: abs(b - int(top.value)))
    near += rest[:max(0, 3 - len(near))]
    curve = _quadratic([(float(b), (runs[b].tgs or 0.0) / top.tgs) for b in near])
    if curve is None:
        return top
    within = [p for p in runs.values() if (p.tgs or 0.0) >= (1 - CHOICE_NOISE) * top.tgs]
    return max(within, key=lambda p: (curve(float(p.value)), p.tgs or 0.0))


def _quadratic(points: list[tuple[float, float]]) -> Callable[[float], float] | None:
    """Least-squares parabola (x centred), or None unless three distinct x and concave."""
    if len({x for x, _ in points}) < 3:
        return None
    mx = statistics.fmean(x for x, _ in points)
    s = [sum((x - mx) ** k for x, _ in points) for k in range(5)]
    t = [sum(y * (x - mx) ** k for x, y in points) for k in range(3)]
    rows = [[s[0], s[1], s[2], t[0]], [s[1], s[2], s[3], t[1]], [s[2], s[3], s[4], t[2]]]
    for i in range(3):  # Gauss-Jordan, partial pivoting
        pivot = max(range(i, 3), key=lambda r: abs(rows[r][i]))
        if abs(rows[pivot][i]) < 1e-12:
            return None
        rows[i], rows[pivot] = rows[pivot], rows[i]
        for r in range(3):
            if r != i:
                f = rows[r][i] / rows[i][i]
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[i], strict=True)]
    a, b, c = (rows[i][3] / rows[i][i] for i in range(3))
    return (lambda x: a + b * (x - mx) + c * (x - mx) ** 2) if c < 0 else None


def _means(probes: Sequence[Probe]) -> dict[int, float]:
    """Mean TGS per value below the lowest failure (a repeated value is averaged)."""
    cliff = min((int(p.value) for p in probes if p.outcome is not Outcome.OK), default=1 << 30)
    runs: dict[int, list[float]] = {}
    for p in probes:
        if p.outcome is Outcome.OK and p.tgs is not None and int(p.value) < cliff:
            runs.setdefault(int(p.value), []).append(p.tgs)
    return {v: statistics.fmean(t) for v, t in runs.items()}


def repeat(both: bool) -> pe.Method:
    """The search, then one more run of the runner-up (both: of the top two) when the top
    two are within the noise; the reported value is the highest mean."""
    def method(cluster: pe.Cluster, estimate: int) -> list[Probe]:
        probes = pe.sweepd(cluster, estimate)
        ranked = sorted(_means(probes).items(), key=lambda kv: -kv[1])
        if len(ranked) >= 2 and ranked[1][1] >= (1 - pe.NOISE) * ranked[0][1]:
            for value in ([ranked[0][0]] if both else []) + [ranked[1][0]]:
                probes.append(cluster.run(value))
        return probes
    return method


def neighbour(cluster: pe.Cluster, estimate: int) -> list[Probe]:
    """The search, then one run of the chosen value's unmeasured neighbour (on the side the
    runner-up or a rising top points to) when the runner-up is within 1% of it."""
    probes = pe.sweepd(cluster, estimate)
    chosen = choose(probes)
    if chosen is None or chosen.tgs is None:
        return probes
    v, ran = int(chosen.value), {int(p.value) for p in probes}
    cliff = min((int(p.value) for p in probes if p.outcome is not Outcome.OK), default=1 << 30)
    others = sorted((p for p in probes if p.outcome is Outcome.OK and p.tgs is not None
                     and int(p.value) != v), key=lambda p: -(p.tgs or 0.0))
    if not others or (others[0].tgs or 0.0) < (1 - pe.NOISE) * chosen.tgs:
        return probes
    up = v == max(ran - {b for b in ran if b >= cliff}) or int(others[0].value) > v
    for side in ((v + 1, v - 1) if up else (v - 1, v + 1)):
        if 1 <= side < cliff and side not in ran:
            probes.append(cluster.run(side))
            break
    return probes


def highest_mean(probes: Sequence[Probe]) -> Probe | None:
    means = _means(probes)
    if not means:
        return None
    value = max(means, key=lambda v: means[v])
    return Probe(value, Outcome.OK, means[value])


@contextlib.contextmanager
def patched(**values: object) -> Iterator[None]:
    old = [(m, k, getattr(m, k)) for k in values for m in MODULES if hasattr(m, k)]
    for m, k, _ in old:
        setattr(m, k, values[k])
    try:
        yield
    finally:
        for m, k, v in old:
            setattr(m, k, v)


def rise_settles(rise: float) -> Callable[[object], list[object]]:
    """The gap just below the highest value run is taken as settled when TGS rose across it
    by more than `rise` noise widths (no interior peak assumed there)."""
    original = mp_bounds.all_gaps

    def gaps(view: mp_view.View) -> list[mp_bounds.Gap]:
        out = []
        for g in original(view):
            top = max(view.ok)
            if g.lo >= 0 and g.hi == top and view.ok[top] >= max(view.ok.values()) \
                    and view.ok[top] > view.ok[g.lo] * (1 + rise * mp.NOISE):
                g = mp_bounds.Gap(g.lo, g.hi, view.ok[top])
            out.append(g)
        return out
    return gaps  # type: ignore[return-value]


def constant_share(share: float) -> Callable[[list[float], list[float]], tuple[float, float]]:
    """One run's memory line takes `share` of its temp as constant, not none: a higher
    predicted max, at the risk of an OOM."""
    original = mp_memory._line

    def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
        if len(xs) == 1:
            return ys[0] * (1 - share) / xs[0], share * ys[0]
        return original(xs, ys)
    return line


Variant = tuple[str, pe.Method, Chooser, dict[str, object]]
VARIANTS: list[Variant] = [
    ("highest measurement (before)", pe.sweepd, best, {}),
    ("fitted choice", pe.sweepd, choose, {}),
    ("repeat the runner-up if within 1%", repeat(False), highest_mean, {}),
    ("repeat both if within 1%", repeat(True), highest_mean, {}),
    ("fitted choice + run its neighbour if within 1%", neighbour, choose, {}),
    ("tolerance 0.2%, step 3 noise widths", pe.sweepd, best,
     {"TOLERANCE": 0.002, "STEP_NOISE": 3.0}),
    ("tolerance 1%", pe.sweepd, best, {"TOLERANCE": 0.01}),
    ("first probe at 50% of the estimate", pe.sweepd, best, {"START_FRACTION": 0.5}),
    ("no 1% memory margin", pe.sweepd, best, {"MEMORY_MARGIN": 0.0}),
    ("rise > 1 noise settles the gap below the top", pe.sweepd, best,
     {"all_gaps": rise_settles(1.0)}),
    ("rise > 4 noise settles the gap below the top", pe.sweepd, best,
     {"all_gaps": rise_settles(4.0)}),
    ("one run's line takes 15% of temp as constant", pe.sweepd, best,
     {"_line": constant_share(0.15)}),
    ("one run's line takes 30% of temp as constant", pe.sweepd, best,
     {"_line": constant_share(0.3)}),
    ("every batch (ceiling), highest measurement", pe.exhaustive, best, {}),
    ("every batch (ceiling), fitted choice", pe.exhaustive, choose, {}),
]


def measure(cases: Sequence[pe.Case], seed: int, method: pe.Method, chooser: Chooser,
            noise: float = pe.NOISE) -> tuple[float, int, float, float]:
    rng = random.Random(seed + 1)  # the stream probe_efficiency.evaluate gives every method
    runs, found, exact = [], 0, 0
    for case in cases:
        cluster = pe.Cluster(case.curve, rng, noise)
        chosen = chooser(method(cluster, case.estimate))
        if case.band != BAND:
            continue
        true = case.curve.true(int(chosen.value)) if chosen is not None else 0.0
        runs.append(cluster.runs)
        found += true >= (1 - pe.FOUND) * case.curve.peak
        exact += true >= case.curve.peak * (1 - 1e-12)
    runs.sort()
    n = len(runs)
    return statistics.mean(runs), runs[math.ceil(0.95 * n) - 1], found / n, exact / n


def where(cases: Sequence[pe.Case], seed: int, noise: float) -> None:
    """Where the shipped search's runs go and why it is not exact, per family."""
    rng = random.Random(seed + 1)
    rows: dict[str, list[tuple[int, int, int, int, bool, bool]]] = {}
    for case in cases:
        cluster = pe.Cluster(case.curve, rng, noise)
        probes = pe.sweepd(cluster, case.estimate)
        if case.band != BAND:
            continue
        ok = [int(p.value) for p in probes if p.outcome is Outcome.OK]
        high = max(ok, default=0)
        reach = next((i + 1 for i, p in enumerate(probes) if int(p.value) == high), len(probes))
        chosen, peak = best(probes), case.curve.peak
        exact = chosen is not None and case.curve.true(int(chosen.value)) >= peak * (1 - 1e-12)
        optimum_ran = any(case.curve.true(b) >= peak * (1 - 1e-12) for b in ok)
        rows.setdefault(case.curve.family, []).append(
            (len(probes), reach, sum(p.outcome is not Outcome.OK for p in probes),
             sum(int(p.value) < high for p in probes[reach:]), exact, optimum_ran))
    print("family: runs = runs to reach the highest value that passed (of them OOM runs) + "
          "runs below it afterwards; not exact: optimum never run / run, not reported")
    for family, rs in sorted(rows.items()):
        def mean(k: int, rs: list[tuple[int, int, int, int, bool, bool]] = rs) -> float:
            return statistics.mean(r[k] for r in rs)
        never = sum(not r[4] and not r[5] for r in rs) / len(rs)
        missed = sum(not r[4] and r[5] for r in rs) / len(rs)
        print(f"  {family:15} {mean(0):.2f} = {mean(1):.2f} ({mean(2):.2f} OOM) + {mean(3):.2f}; "
              f"not exact: {never:.1%} / {missed:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--holdout-seed", type=int, default=99173)
    parser.add_argument("--noise", type=float, default=pe.NOISE)
    parser.add_argument("--where", action="store_true",
                        help="where the shipped search's runs go, and its exact misses")
    parser.add_argument("--smoke", action="store_true",
                        help="a few curves through every path (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.curves = 5
        where(pe.workload(args.curves, args.seed), args.seed, args.noise)
    tuned = pe.workload(args.curves, args.seed)
    held = pe.workload(args.curves, args.holdout_seed, pe.HOLDOUT_FAMILIES, curvature=0.08)
    if args.where:
        where(tuned, args.seed, args.noise)
        where(held, args.holdout_seed, args.noise)
        return
    print(f"noise +-{args.noise:.2%}, estimate {BAND}; tuned: mean runs, p95, found 1%, "
          "exact | held out: the same")
    for name, method, chooser, patch in VARIANTS:
        with patched(**patch):
            t = measure(tuned, args.seed, method, chooser, args.noise)
            h = measure(held, args.holdout_seed, method, chooser, args.noise)
        print(f"| {name} | {t[0]:.2f} | {t[1]} | {t[2]:.1%} | {t[3]:.1%} | "
              f"{h[0]:.2f} | {h[1]} | {h[2]:.1%} | {h[3]:.1%} |", flush=True)


if __name__ == "__main__":
    main()
