"""Where the default's found is lost on the random families (issue 43, item 0; not a test).

    python bench/xla_tuning_found_losses.py [--landscapes N] [--family F] [--seed S]
                                            [--proposer P] [--smoke]

On each landscape (bench/xla_tuning_landscapes.py, the seeds of xla_tuning_tpe_waves.py)
the planner runs with `proposer` (default: the seed's rules; another proposer at the
default's run count on that landscape, as xla_tuning_tpe_waves.py). The
good recipes are every recipe of <= 3 flags (catalog + restore_default) whose true gain is
within 1 % of the best's. A verdict not among them is put in one place:

* measured, another confirmed: a good recipe ran on the primary tag, yet the verdict named
  another (split: the verdict a confirmed >= +5 % win, the seed's first-win stop; or not);
* a part never run: every good recipe holds a profile that never ran, alone or in a stack
  (split: that part is >= +0.5 % alone, or it helps only beside another flag);
* never stacked: some good recipe's parts all ran, the recipe itself never did.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from xla_tuning_landscapes import GENERATORS, LATEST
from xla_tuning_tpe_waves import FAMILY_SEEDS

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism, Profile
from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, truth
from sweepd.kinds.xla_tuning.evidence.results import Outcome
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.thresholds import Proposer

FOUND = "found"
OTHER_WIN = "measured, another confirmed >= +5 % first"
OTHER = "measured, another named (no first win)"
PART_POS = "a part never run (>= +0.5 % alone)"
PART_INT = "a part never run (helps only beside another)"
NEVER_STACKED = "parts all run, the stack never"
KINDS = (FOUND, OTHER_WIN, OTHER, PART_POS, PART_INT, NEVER_STACKED)


def good_recipes(land: Landscape, profs: list[Profile], best: float) -> list[tuple[str, ...]]:
    """Every recipe of <= 3 flags within 1 % of the best true gain, as profile names."""
    tag = land.tags[0]
    ok = [p for p in profs if land.gain(p.settings, tag) is not None]
    out: list[tuple[str, ...]] = []
    for k in (1, 2, 3):
        for combo in itertools.combinations(ok, k):
            settings = tuple(s for p in combo for s in p.settings)
            if len(settings) > 3 or len({s.key for s in settings}) < len(settings):
                continue
            g = land.gain(settings, tag)
            if g is not None and g >= best / 1.01:
                out.append(tuple(p.name for p in combo))
    return out


def classify(fam: str, n: int, seed: int, proposer: Proposer) -> list[tuple[str, str]]:
    """Each landscape's place (KINDS) and its verdict's stop rule."""
    rng = random.Random(seed * 1000 + FAMILY_SEEDS[fam])
    kinds: list[str] = []
    stops: list[str] = []
    for i in range(n):
        land, cat = {**GENERATORS, **LATEST}[fam](rng)
        restore = restore_default(land.deployed_settings())
        profs = [*cat, *([restore] if restore else [])]
        best = truth(land, profs)
        cap: int | None = None
        if proposer != "rules":  # at the default's run count on this landscape
            inp = Inputs(Parallelism.parse(land.parallelism), tuple(cat), tags=land.tags,
                         deployed=land.deployed_settings())
            cap = len(replay(inp, land, random.Random(seed * 7919 + i)).results)
        inp = Inputs(Parallelism.parse(land.parallelism), tuple(cat), tags=land.tags,
                     deployed=land.deployed_settings(), proposer=proposer, max_runs=cap)
        r = replay(inp, land, random.Random(seed * 7919 + i))
        g = land.gain(r.settings(inp), land.tags[0]) if r.verdict.recipe else 1.0
        stops.append(f"{r.verdict.rule}{' (win)' if r.verdict.win else ''}")
        if (g or 0.0) >= best.gain / 1.01:
            kinds.append(FOUND)
            continue
        # A recipe that only interacts (no gain alone) is not in truth's `useful` set, so the
        # good recipes are enumerated over profiles that help alone or interact (as truth).
        useful = [p for p in profs if (land.gain(p.settings, land.tags[0]) or 0) > 1.0
                  or any(s.key in m or s.label == m for it in land.interactions
                         for m in it.members for s in p.settings)]
        good = good_recipes(land, useful, best.gain)
        ran = {x.profile for x in r.results if x.tag == land.tags[0]
               and x.outcome is Outcome.OK}
        parts_ran = {part for name in ran for part in name.split("+")}
        if any("+".join(sorted(rec)) in {"+".join(sorted(x.split("+"))) for x in ran}
               for rec in good):
            kinds.append(OTHER_WIN if r.verdict.win else OTHER)
        elif any(set(rec) <= parts_ran for rec in good):
            kinds.append(NEVER_STACKED)
        else:
            table = {p.name: p for p in profs}
            missing = {p for rec in good for p in rec if p not in parts_ran}
            alone = max((land.gain(table[p].settings, land.tags[0]) or 0.0) for p in missing)
            kinds.append(PART_POS if alone >= 1.005 else PART_INT)
            print(f"    missing {sorted(missing)} best alone {alone - 1:+.1%}", file=sys.stderr)
        print(f"  {fam} #{i}: {kinds[-1]}; verdict {r.verdict.kind} win={r.verdict.win} "
              f"true {(g or 0) - 1:+.1%} vs best {best.gain - 1:+.1%} {best.recipe}; "
              f"{len(r.results)} runs", file=sys.stderr, flush=True)
    return list(zip(kinds, stops, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--landscapes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=sorted({**GENERATORS, **LATEST}))
    ap.add_argument("--proposer", default="rules", choices=("rules", "tpe", "surrogate"))
    ap.add_argument("--smoke", action="store_true", help="2 landscapes of one family")
    args = ap.parse_args()
    fams = ["tuned"] if args.smoke else (args.family or ["tuned", "heldout", "fresh"])
    n = 2 if args.smoke else args.landscapes
    for fam in fams:
        rows = classify(fam, n, args.seed, args.proposer)
        c = Counter(k for k, _ in rows)
        print(f"{fam} ({n} landscapes, proposer {args.proposer}):")
        for k in KINDS:
            print(f"  {k:<48} {c[k]:3d} ({c[k] / n:6.1%})")
        misses = Counter(s for k, s in rows if k != FOUND)
        print("  misses by the verdict's stop rule: " + ", ".join(
            f"{s} {m}" for s, m in misses.most_common()))


if __name__ == "__main__":
    main()
