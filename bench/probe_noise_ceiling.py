"""What any batch search can reach at real run-to-run noise (not a test).

    python bench/probe_noise_ceiling.py [--curves N] [--seed S] [--draws D]

The same curves as bench/probe_efficiency.py (tuned set, its seed). Noise: Gaussian with
a relative std of 0.8% per run (xla-tuning-facts.md: 7-8 TGS std on ~1,000 TGS on a pinned
nodelist), and, for comparison, probe_efficiency.py's uniform +-1% (std 0.58%).

Oracles, each far stronger than a real search (they never pay for memory: no OOM, no
probe to find the largest fit):
- *top-k x r*: knows which k batches are the best k (the true optimum among them, but not
  which), measures each r times and reports the highest mean: k*r runs. Top-2 is the
  least any method must tell apart to be exact.
- *all x r*: knows the largest fit M only, measures every batch 1..M r times and reports
  the highest mean: M*r runs.
Rates are averaged over D noise draws per curve. "found (1%)" and "exact" as in
probe_efficiency.py.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_efficiency import BANDS, FOUND, Curve, workload

REAL_STD = 0.008
Noise = Callable[[random.Random], float]


def gaussian(std: float) -> Noise:
    return lambda rng: rng.gauss(1.0, std)


def uniform(half: float) -> Noise:
    return lambda rng: rng.uniform(1 - half, 1 + half)


def pick(curve: Curve, batches: Sequence[int], repeats: int, noise: Noise,
         rng: random.Random) -> int:
    """The batch with the highest mean of `repeats` noisy measurements."""
    def mean(b: int) -> float:
        return statistics.fmean(curve.true(b) * noise(rng) for _ in range(repeats))
    return max(batches, key=mean)


def rates(curves: Sequence[Curve], choose: Callable[[Curve, random.Random], int],
          draws: int, seed: int) -> tuple[float, float]:
    """(found within 1%, exact) over every curve and noise draw."""
    rng = random.Random(seed)
    found = exact = 0
    for curve in curves:
        peak = curve.peak
        for _ in range(draws):
            true = curve.true(choose(curve, rng))
            found += true >= (1 - FOUND) * peak
            exact += true >= peak * (1 - 1e-12)
    n = len(curves) * draws
    return found / n, exact / n


def top(curve: Curve, k: int) -> list[int]:
    return sorted(range(1, curve.max_fit + 1), key=curve.true, reverse=True)[:k]


def gaps(curves: Sequence[Curve]) -> str:
    """How far the runner-up is below the optimum (ties with the optimum are the optimum)."""
    out = []
    for curve in curves:
        peak = curve.peak
        below = [t for t in curve.tgs if t < peak * (1 - 1e-12)]
        out.append(1 - max(below) / peak if below else 1.0)
    shares = [f"< {t:.2%}: {sum(g < t for g in out) / len(out):.1%}"
              for t in (0.001, 0.0025, 0.005, 0.008, 0.01, 0.02)]
    return "runner-up below the optimum by " + ", ".join(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--smoke", action="store_true",
                        help="a few curves through every path (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.curves, args.draws = 30, 4
    cases = [c for c in workload(args.curves, args.seed) if c.band == BANDS[0]]
    curves = [c.curve for c in cases]
    mean_m = statistics.fmean(c.max_fit for c in curves)
    print(f"{len(curves)} curves (probe_efficiency.py's tuned set, x0.2-5 band), "
          f"{args.draws} noise draws each; mean largest fit {mean_m:.1f}")
    print(gaps(curves))
    for label, noise in ((f"Gaussian std {REAL_STD:.1%} (real)", gaussian(REAL_STD)),
                         ("uniform +-1% (probe_efficiency.py)", uniform(0.01))):
        print(f"\n[{label}]\n{'oracle':14} {'runs':>6} {'found 1%':>9} {'exact':>7}")
        table(curves, noise, args.draws, args.seed)


def table(curves: Sequence[Curve], noise: Noise, draws: int, seed: int) -> None:
    mean_m = statistics.fmean(c.max_fit for c in curves)
    for k in (2, 3, 5):
        for r in (1, 2, 4, 8, 16):
            def known(c: Curve, g: random.Random, k: int = k, r: int = r) -> int:
                return pick(c, top(c, k), r, noise, g)
            found, exact = rates(curves, known, draws, seed)
            print(f"{f'top-{k} x {r}':14} {k * r:6d} {found:9.1%} {exact:7.1%}")
    for r in (1, 2, 4):
        def every(c: Curve, g: random.Random, r: int = r) -> int:
            return pick(c, range(1, c.max_fit + 1), r, noise, g)
        found, exact = rates(curves, every, max(1, draws // 4), seed)
        print(f"{f'all x {r}':14} {r * mean_m:6.1f} {found:9.1%} {exact:7.1%}")

if __name__ == "__main__":
    main()
