"""`proposer: tpe` against the default and plain TPE at the default's run count (issue 43,
item 0; not a test).

    python bench/xla_tuning_tpe_waves.py [--landscapes N] [--family F] [--seed S] [--smoke]

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
from xla_tuning_landscapes import GENERATORS

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import truth
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay

METHODS = ("seed", "tpe in waves", "plain tpe")


def run(fam: str, n: int, seed: int) -> dict[str, tuple[int, list[int]]]:
    rng = random.Random(seed * 1000 + SEEDS[fam])
    found = dict.fromkeys(METHODS, 0)
    runs: dict[str, list[int]] = {m: [] for m in METHODS}
    for i in range(n):
        land, cat = GENERATORS[fam](rng)
        restore = restore_default(land.deployed_settings())
        best = truth(land, (*cat, *([restore] if restore else [])))
        s = seed * 7919 + i
        cap: int | None = None
        for m, proposer in (("seed", "seed"), ("tpe in waves", "tpe")):
            inp = Inputs(Parallelism.parse(land.parallelism), tuple(cat), tags=land.tags,
                         deployed=land.deployed_settings(), proposer=proposer, max_runs=cap)
            r = replay(inp, land, random.Random(s))
            g = land.gain(r.settings(inp), land.tags[0]) if r.verdict.recipe else 1.0
            found[m] += (g or 0.0) >= best.gain / 1.01
            runs[m].append(len(r.results))
            cap = cap or len(r.results)
        c = methods.tpe(land, cat, random.Random(s), cap or 0)
        g = land.gain(c.settings, land.tags[0]) if c.settings else 1.0
        found["plain tpe"] += (g or 0.0) >= best.gain / 1.01
        runs["plain tpe"].append(c.runs)
    return {m: (found[m], runs[m]) for m in METHODS}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--landscapes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=["tuned", "heldout", "fresh"])
    ap.add_argument("--smoke", action="store_true", help="2 landscapes of one family")
    args = ap.parse_args()
    fams = ["tuned"] if args.smoke else (args.family or ["tuned", "heldout", "fresh"])
    n = 2 if args.smoke else args.landscapes
    print(f"{'family':<9} {'method':<13} {'found':>7} {'runs':>6}")
    for fam in fams:
        for m, (found, runs) in run(fam, n, args.seed).items():
            print(f"{fam:<9} {m:<13} {found / n:7.1%} {statistics.fmean(runs):6.1f}")


if __name__ == "__main__":
    main()
