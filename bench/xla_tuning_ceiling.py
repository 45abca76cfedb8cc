"""What any xla-tuning search can reach at real run-to-run noise (not a test).

    python bench/xla_tuning_ceiling.py [--landscapes N] [--draws D] [--seed S] [--family F]
                                       [--smoke]

The same landscapes as bench/xla_tuning_efficiency.py (same seeds): the facts file's FSDP=8
and PP=8 cells and the `tuned`, `heldout` and `fresh` random families. For each landscape
every recipe of at most 3 flags built from the profiles `landscape.truth` considers (the
catalog plus restore_default; profiles that help alone or take part in an interaction) is
ranked by its TRUE gain. "found" is the bench's: the picked recipe's true gain within 1 % of
the best one's.

Oracles, each far stronger than any search (no flakes, no OOMs, no unknown flags, no
baseline runs; all but the singles oracle spend no run finding the candidates):
- *top-k x r*: knows which k recipes are the true best k (not their order), measures each r
  times and picks the highest mean: k*r runs.
- *best vs k-1 rivals x r*: knows the true best recipe and its k-1 strongest rivals that are
  NOT within 1 % of it (the recipes any search must tell it from; every recipe within 1 % is
  left out, so only the best counts as found) and measures those k, r times each (k*r runs).
  k=2 is the least any method must do.
- *singles x r, stacks free*: measures every single (catalog + restore_default) r times,
  keeps the m best means of distinct flags (each family's best-measured value), then knows
  the TRUE gain of every recipe of <= 3 of those m (stacking costs no run and carries no
  noise): how many runs finding the ingredients takes.
- *every recipe within m x r*: knows every recipe within m (2 %, 3 %) of the best, measures
  each r times and picks the highest mean (the good ones within 1 % count as found).
Noise: Gaussian, relative std 0.8 % per run (xla-tuning-facts.md: 7-8 TGS on ~1,000, a
pinned nodelist), 0.3 % (the SKILL.md's quietest), and in `fresh` also the cell's own
(0.4-1.2 %). Rates are averaged over D noise draws per landscape. The last columns of the
landscape line: how many recipes are within 1 % of the best, and the gap from the best to
its strongest rival outside 1 % (the smaller, the harder).
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from xla_tuning_efficiency import SEEDS
from xla_tuning_landscapes import GENERATORS, Case
from xla_tuning_methods import exhaustive

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Profile
from sweepd.kinds.xla_tuning.catalog.defaults import default_landscapes
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog, restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, _interacts

FOUND = 0.01
KS = (2, 3, 5, 10, 20)
RS = (1, 2, 3, 4, 6, 8)
RIVAL_RS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Ranked:
    gains: tuple[float, ...]  # true gains of every recipe, best first
    exhaustive_runs: int
    catalog: int
    noise: float  # the cell's own run-to-run noise
    # every catalog profile: name, true gain (0: it cannot run), the keys it sets
    singles: tuple[tuple[str, float, frozenset[str]], ...] = ()
    combos: dict[frozenset[str], float] | None = None  # recipe (profile names) -> true gain

    @property
    def good(self) -> int:  # recipes within 1 % of the best
        return sum(g >= self.gains[0] / (1 + FOUND) for g in self.gains)

    @property
    def rival(self) -> float | None:  # the best recipe outside 1 %
        return self.gains[self.good] if self.good < len(self.gains) else None


def recipes(land: Landscape, cat: Sequence[Profile]) -> dict[frozenset[str], float]:
    """True gains of every recipe of <= 3 flags of the profiles `truth` searches."""
    tag = land.tags[0]
    restore = restore_default(land.deployed_settings())
    profiles = (*cat, *([restore] if restore else []))
    gain = {p.name: land.gain(p.settings, tag) for p in profiles}
    useful = [p for p in profiles if gain[p.name] is not None
              and ((gain[p.name] or 0) > 1.0 or _interacts(land, p))]
    out: dict[frozenset[str], float] = {frozenset(): 1.0}  # baseline-deployed
    for k in (1, 2, 3):
        for combo in itertools.combinations(useful, k):
            settings = tuple(s for p in combo for s in p.settings)
            if len(settings) > 3 or len({s.key for s in settings}) < len(settings):
                continue
            g = land.gain(settings, tag)
            if g is not None:
                out[frozenset(p.name for p in combo)] = g
    return out


def rank(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Ranked:
    ex = exhaustive(land, cat, rng).runs
    combos = recipes(land, cat)
    restore = restore_default(land.deployed_settings())
    profiles = (*cat, *([restore] if restore else []))
    singles = tuple((p.name, land.gain(p.settings, land.tags[0]) or 0.0, p.keys)
                    for p in profiles)
    return Ranked(tuple(sorted(combos.values(), reverse=True)), ex, len(cat), land.noise,
                  singles, combos)


def stack_oracle(r: Ranked, m: int, reps: int, std: float, draws: int,
                 rng: random.Random) -> float:
    """Every single measured reps times; the m best means of distinct flags kept (a family's
    best-measured value); then the best recipe of <= 3
    of those m picked by its TRUE gain (stacks cost nothing and carry no noise)."""
    assert r.combos is not None
    bar = r.gains[0] / (1 + FOUND)
    sd = std / math.sqrt(reps)
    hit = 0
    for _ in range(draws):
        means = sorted(r.singles, key=lambda s: -s[1] * (1 + rng.gauss(0.0, sd)))
        top: list[str] = []
        seen: set[str] = set()
        for name, g, keys in means:  # the best-measured value of each flag, m flags
            if g > 0 and not keys & seen and len(top) < m:
                top.append(name)
                seen |= keys
        best = max((r.combos.get(frozenset(c), 0.0) for k in (1, 2, 3)
                    for c in itertools.combinations(top, k)), default=1.0)
        hit += max(best, 1.0) >= bar
    return hit / draws


def top_k(r: Ranked, k: int, reps: int, std: float, draws: int, rng: random.Random) -> float:
    """Share of draws whose highest mean of the top k (reps runs each) is within 1 %."""
    gains = r.gains[:k]
    bar = r.gains[0] / (1 + FOUND)
    sd = std / math.sqrt(reps)  # the mean of reps runs
    hit = 0
    for _ in range(draws):
        pick = max(range(len(gains)), key=lambda i: gains[i] * (1 + rng.gauss(0.0, sd)))
        hit += gains[pick] >= bar
    return hit / draws


def rivals(r: Ranked, k: int, reps: int, std: float, draws: int, rng: random.Random) -> float:
    """Share of draws in which the best recipe's mean beats its k-1 strongest rivals outside
    1 % (reps runs each): the good recipes within 1 % are left out, so only the best counts."""
    gains = (r.gains[0], *r.gains[r.good:r.good + k - 1])
    sd = std / math.sqrt(reps)
    hit = 0
    for _ in range(draws):
        pick = max(range(len(gains)), key=lambda i: gains[i] * (1 + rng.gauss(0.0, sd)))
        hit += pick == 0
    return hit / draws


def band(r: Ranked, margin: float, reps: int, std: float, draws: int,
         rng: random.Random) -> tuple[float, int]:
    """(found, runs) when every recipe within `margin` of the best is measured reps times."""
    gains = [g for g in r.gains if g >= r.gains[0] / (1 + margin)]
    bar = r.gains[0] / (1 + FOUND)
    sd = std / math.sqrt(reps)
    hit = 0
    for _ in range(draws):
        pick = max(gains, key=lambda g: g * (1 + rng.gauss(0.0, sd)))
        hit += pick >= bar
    return hit / draws, len(gains) * reps


def _real(seed: int) -> list[Ranked]:
    out = []
    for land in default_landscapes():
        cat = default_catalog(Parallelism.parse(land.parallelism))
        out.append(rank(land, cat, random.Random(seed)))
    return out


def _family(fam: str, n: int, seed: int) -> list[Ranked]:
    rng = random.Random(seed * 1000 + SEEDS[fam])
    cases: list[Case] = [GENERATORS[fam](rng) for _ in range(n)]
    return [rank(land, cat, random.Random(seed * 7919 + i)) for i, (land, cat) in
            enumerate(cases)]


def _quantiles(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return f"{q[0]:.2%} / {q[1]:.2%} / {q[2]:.2%}"


def describe(name: str, rs: list[Ranked]) -> None:
    ex = statistics.fmean(r.exhaustive_runs for r in rs)
    rivals = [r.gains[0] / r.rival - 1 for r in rs if r.rival is not None]
    print(f"\n{name}: {len(rs)} landscapes, catalog {statistics.fmean(r.catalog for r in rs):.1f}"
          f" profiles, exhaustive {ex:.1f} runs; recipes within 1 % of the best: median "
          f"{statistics.median(r.good for r in rs):.0f}; gap to the best rival outside 1 % "
          f"(quartiles): {_quantiles(rivals)}; share with gap < 1.5 %: "
          f"{sum(g < 0.015 for g in rivals) / max(1, len(rivals)):.0%}")


def table(name: str, rs: list[Ranked], std: float | None, draws: int, seed: int) -> None:
    ex = statistics.fmean(r.exhaustive_runs for r in rs)
    label = "the cell's own noise" if std is None else f"noise {std:.1%}"
    print(f"  top-k x r, {label}: found (runs, % of exhaustive)")
    print("  " + f"{'k':>3} " + " ".join(f"{'r=' + str(r):>17}" for r in RS))
    rng = random.Random(seed)
    for k in KS:
        cells = []
        for reps in RS:
            f = statistics.fmean(top_k(r, k, reps, std or r.noise, draws, rng) for r in rs)
            runs = k * reps
            cells.append(f"{f:6.1%} ({runs:3d},{runs / ex:4.0%})")
        print("  " + f"{k:>3} " + " ".join(f"{c:>17}" for c in cells))
    print(f"  every single x r, then the best stack of the m best singles by TRUE gain, "
          f"{label}: found (runs = catalog x r)")
    cat = statistics.fmean(len(r.singles) for r in rs)
    for m in (3, 5, 8):
        cells = []
        for reps in (1, 2, 3, 4):
            f = statistics.fmean(stack_oracle(r, m, reps, std or r.noise, max(20, draws // 5),
                                              rng) for r in rs)
            cells.append(f"r={reps}: {f:6.1%} ({cat * reps:4.0f},{cat * reps / ex:5.0%})")
        print(f"  m={m} " + ", ".join(cells))
    print(f"  every recipe within m of the best x r, {label}: found (mean runs)")
    for margin in (0.02, 0.03):
        cells = []
        for reps in (1, 2, 4):
            got = [band(r, margin, reps, std or r.noise, max(20, draws // 5), rng) for r in rs]
            f = statistics.fmean(g[0] for g in got)
            mean_runs = statistics.fmean(g[1] for g in got)
            cells.append(f"r={reps}: {f:6.1%} ({mean_runs:5.0f})")
        print(f"  m={margin:.0%} " + ", ".join(cells))
    print(f"  best vs k-1 rivals outside 1 % x r, {label}: found")
    for k in (2, 3, 5, 10):
        cells = []
        for reps in RIVAL_RS:
            f = statistics.fmean(rivals(r, k, reps, std or r.noise, draws, rng) for r in rs)
            cells.append(f"r={reps}: {f:6.1%} ({k * reps:3d})")
        print(f"  {k:>3} " + ", ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscapes", type=int, default=200)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=["real", *GENERATORS])
    ap.add_argument("--smoke", action="store_true",
                    help="2 landscapes, 3 draws: the whole path in seconds")
    args = ap.parse_args()
    if args.smoke:
        args.landscapes, args.draws = 2, 3
    fams = args.family or ["real", *GENERATORS]
    sets: dict[str, list[Ranked]] = {}
    if "real" in fams:
        sets["facts file: FSDP=8 and PP=8"] = _real(args.seed)
    for fam in GENERATORS:
        if fam in fams:
            sets[f"random, {fam}"] = _family(fam, args.landscapes, args.seed)
    for name, rs in sets.items():
        draws = args.draws * 20 if name.startswith("facts") else args.draws
        describe(name, rs)
        for std in (0.008, 0.003):
            table(name, rs, std, draws, args.seed)
        if name.endswith("fresh"):
            table(name, rs, None, draws, args.seed)


if __name__ == "__main__":
    main()
