"""The proposer options against the default and plain TPE at the default's run count (issue
43, item 0; not a test).

    python bench/xla_tuning_tpe_waves.py [--landscapes N] [--family F] [--seed S]
                                         [--stop seed|thorough] [--smoke]

`--family`: tuned, heldout, fresh (the efficiency bench's random families), latest (written
after the surrogate proposer, bench/xla_tuning_landscapes.LATEST) and facts (the facts file's
FSDP=8 and PP=8 cells, alternately, each with fresh noise). The surrogate proposer needs
scikit-learn.

On each landscape of the random families (bench/xla_tuning_landscapes.py, the seeds of
bench/xla_tuning_efficiency.py): the planner with the seed's rules (`proposer: seed`, the
default), the planner whose exploring runs Optuna's TPE proposes (`proposer: tpe`, its run
cap the default's run count on that landscape), and plain TPE over three recipe slots at the
default's run count (bench/xla_tuning_methods.py's `tpe`, its best measurement claimed).
found = the recipe's true gain within 1 % of the best true recipe (as the efficiency bench).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import xla_tuning_methods as methods
from xla_tuning_efficiency import SEEDS
from xla_tuning_landscapes import GENERATORS, LATEST, Case

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import default_landscapes
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog, restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import truth
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.thresholds import Proposer, Stop

METHODS = ("seed", "surrogate", "tpe in waves", "plain tpe")
PROPOSERS: tuple[tuple[str, Proposer], ...] = (
    ("seed", "rules"), ("surrogate", "surrogate"), ("tpe in waves", "tpe"))
FAMILY_SEEDS = {**SEEDS, "latest": 23, "facts": 29}


def case(fam: str, rng: random.Random, i: int) -> Case:
    if fam == "facts":
        land = default_landscapes()[i % 2]
        return land, default_catalog(Parallelism.parse(land.parallelism))
    return {**GENERATORS, **LATEST}[fam](rng)


Tally = tuple[int, list[int], int, list[float]]  # found, runs, false wins, shares of best


def run(fam: str, n: int, seed: int, stop: Stop = "seed") -> dict[str, Tally]:
    rng = random.Random(seed * 1000 + FAMILY_SEEDS[fam])
    found = dict.fromkeys(METHODS, 0)
    false = dict.fromkeys(METHODS, 0)
    runs: dict[str, list[int]] = {m: [] for m in METHODS}
    share: dict[str, list[float]] = {m: [] for m in METHODS}  # of the best's true gain
    for i in range(n):
        land, cat = case(fam, rng, i)
        restore = restore_default(land.deployed_settings())
        best = truth(land, (*cat, *([restore] if restore else [])))
        s = seed * 7919 + i
        cap: int | None = None
        for m, proposer in PROPOSERS:
            inp = Inputs(Parallelism.parse(land.parallelism), tuple(cat), tags=land.tags,
                         deployed=land.deployed_settings(), proposer=proposer, max_runs=cap,
                         stop=stop)
            r = replay(inp, land, random.Random(s))
            g = (land.gain(r.settings(inp), land.tags[0]) or 0.0) if r.verdict.recipe else 1.0
            found[m] += g >= best.gain / 1.01
            false[m] += r.verdict.win and g < 1.045
            share[m].append((g - 1) / (best.gain - 1) if best.gain > 1.0 else 1.0)
            runs[m].append(len(r.results))
            cap = cap or len(r.results)
        c = methods.tpe(land, cat, random.Random(s), cap or 0)
        g = (land.gain(c.settings, land.tags[0]) or 0.0) if c.settings else 1.0
        found["plain tpe"] += g >= best.gain / 1.01
        share["plain tpe"].append((g - 1) / (best.gain - 1) if best.gain > 1.0 else 1.0)
        false["plain tpe"] += c.claims_win and g < 1.045
        runs["plain tpe"].append(c.runs)
        print(f"  {fam} {i + 1}/{n}", file=sys.stderr, flush=True)
    return {m: (found[m], runs[m], false[m], share[m]) for m in METHODS}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--landscapes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=sorted(FAMILY_SEEDS))
    ap.add_argument("--stop", choices=["seed", "thorough"], default="seed",
                    help="the planners' stop rules (the default: the seed's)")
    ap.add_argument("--smoke", action="store_true", help="2 landscapes of one family")
    args = ap.parse_args()
    fams = ["tuned"] if args.smoke else (args.family or ["tuned", "heldout", "fresh"])
    n = 2 if args.smoke else args.landscapes
    print(f"{'family':<9} {'method':<13} {'found':>7} {'runs':>6} {'false wins':>10} "
          f"{'share of best':>13}")
    for fam in fams:
        for m, (found, runs, false, share) in run(fam, n, args.seed, args.stop).items():
            print(f"{fam:<9} {m:<13} {found / n:7.1%} {statistics.fmean(runs):6.1f} "
                  f"{false:10d} {statistics.fmean(share):13.1%}", flush=True)


if __name__ == "__main__":
    main()
