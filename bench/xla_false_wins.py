"""How often the planner's "confirmed >= +5 %" claim is false, at the cell's real noise (not a
test).

    python bench/xla_false_wins.py [--sweeps N] [--seed S] [--candidates K] [--spread X]
                                   [--shipped] [--truth G ...] [--noise N ...] [--drift D]
                                   [--drift-read mean|line|trend] [--smoke]

Each case is a landscape whose truly best recipe (<= 3 flags of a random catalog,
bench/xla_tuning_landscapes.py's `_catalog`, or with --shipped the shipped one less its
pipeline shapes and two-flag family) is worth exactly a given gain: K near-bar flags (the
best at that gain, the others 0 to --spread under it, in the mechanisms the evidence
points at, as the red team's `many4` cells), the rest of the catalog worth 0 to -0.4 % or
clearly harmful, and any stack of two near-bar flags worth a little less than the better
one (they share a bottleneck), so nothing beats the truth. The run-to-run noise of the cell
is 0.8 % (the facts file's typical), 1.5, 2.0 or 2.5 % (noisy clusters); the planner's
prior stays at the facts file's 0.8 % (it is not told). Each sweep is `replay`ed in seed
mode (the default stop rules) to its verdict.

Figures per (truth, noise): *confirmed*: sweeps whose verdict says "confirmed >= +5 %"
(`Verdict.win`); below +5 % truth that is a false confirm (the one-sided level is 5 %), at
+6 / +8 % it is the power; *bias*: mean(claimed - true gain) in points over the verdicts
that name a recipe, and over the confirmed ones; *runs*: mean runs per sweep.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from xla_tuning_landscapes import Case, _catalog, _evidence

from sweepd.kinds.xla_tuning.catalog.catalog import (
    COST_MECHANISMS,
    Cost,
    Mechanism,
    Parallelism,
    Profile,
)
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Interaction, Landscape, truth
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS
from sweepd.kinds.xla_tuning.waves.in_effect import holds_already
from sweepd.kinds.xla_tuning.waves.planned import VerdictKind

TRUTHS = (0.040, 0.042, 0.046, 0.060, 0.080)
NOISES = (0.008, 0.015, 0.020, 0.025)
WIN = 0.05


def cell(rng: random.Random, gain: float, noise: float, candidates: int,
         spread: float = 0.015, shipped: bool = False) -> Case:
    """A landscape whose best recipe is worth `gain` exactly (see the module's docstring)."""
    par = Parallelism.parse(rng.choice(("FSDP=8", "TP=8")))
    # The shipped catalog less its pipeline shapes, its two-flag family (one label, one
    # effect: the truth stays what the cell says) and lhs (the image's own value: no effect
    # to give, and the planner does not run it).
    cat = (tuple(p for p in default_catalog(par)
                 if Mechanism.PIPELINE not in p.mechanisms and len(p.settings) == 1
                 and not holds_already(p, ()))
           if shipped else _catalog(rng, par))
    fams: dict[str, list[Profile]] = {}
    for p in cat:
        fams.setdefault(p.family or p.name, []).append(p)
    evidence = _evidence(rng)
    lead = max(evidence, key=lambda c: (c is not Cost.COMPUTE, evidence[c]))
    hot = set(COST_MECHANISMS[lead])
    effects: dict[str, Effect] = {}
    for members in fams.values():
        harm = rng.random() < 0.25
        for p in members:
            d = -rng.uniform(0.01, 0.06) if harm else -rng.uniform(0.0, 0.004)
            effects[p.settings[0].label] = Effect(tgs=1 + d)
    pointed = [f for f, ps in fams.items() if ps[0].mechanisms & hot]
    rest = [f for f in fams if f not in pointed]
    rng.shuffle(pointed)
    rng.shuffle(rest)
    near = (pointed + rest)[:candidates]
    peaks = [gain] + [gain - rng.uniform(0.0, spread) for _ in near[1:]]
    for fam, peak in zip(near, peaks, strict=True):
        members = fams[fam]
        at = rng.randrange(len(members))
        for i, p in enumerate(members):
            d = peak if i == at else peak * rng.uniform(0.2, 0.8)
            effects[p.settings[0].label] = Effect(tgs=1 + d)
    keys = [fams[f][0].settings[0].key for f in near]
    inter = tuple(Interaction(members=(keys[i], keys[j]),
                              tgs=0.995 / (1 + min(peaks[i], peaks[j])))
                  for i in range(len(keys)) for j in range(i + 1, len(keys)))
    land = Landscape(parallelism=par.text, tags=("default",), base_tgs={"default": 1000.0},
                     effects=effects, interactions=inter, noise=noise, flake_rate=0.0,
                     evidence=evidence)
    best = truth(land, cat)
    assert abs(best.gain - 1 - gain) < 1e-9, (best, gain)
    return land, cat


@dataclass
class Tally:
    n: int = 0
    confirmed: int = 0
    runs: list[int] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)  # claimed - true, recipe verdicts
    confirmed_errors: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)  # the interval holds the true gain


def sweep(case: Case, rng: random.Random, t: Tally, report_runs: int,
          drift_read: DriftRead = THRESHOLDS.drift) -> None:
    land, profiles = case
    inp = Inputs(Parallelism.parse(land.parallelism), profiles, tags=land.tags, win=WIN,
                 report_runs=report_runs, drift=drift_read)
    r = replay(inp, land, rng)
    v = r.verdict
    t.n += 1
    t.runs.append(len(r.results))
    if v.recipe is None or v.gain is None:
        return
    true_gain = (land.gain(r.settings(inp), land.tags[0]) or 0.0) - 1
    t.errors.append(v.gain - true_gain)
    if v.interval is not None:
        t.covered.append(v.interval[0] <= true_gain <= v.interval[1])
    if v.win and v.kind is VerdictKind.PROPOSAL:
        t.confirmed += 1
        t.confirmed_errors.append(v.gain - true_gain)


def run(sweeps: int, seed: int, candidates: int, spread: float, shipped: bool,
        truths: tuple[float, ...] = TRUTHS, noises: tuple[float, ...] = NOISES,
        report_runs: int = 2, drift: float = 0.0, drift_read: DriftRead = THRESHOLDS.drift
        ) -> dict[tuple[float, float], Tally]:
    out: dict[tuple[float, float], Tally] = {}
    for gain in truths:
        for noise in noises:
            t = out.setdefault((gain, noise), Tally())
            for i in range(sweeps):
                s = seed * 100_003 + i  # the same landscapes and noise stream per case
                land, cat = cell(random.Random(s), gain, noise, candidates, spread, shipped)
                case = (land.model_copy(update={"drift": drift}) if drift else land, cat)
                sweep(case, random.Random(s + 1), t, report_runs, drift_read)
    return out


def _pts(xs: list[float]) -> str:
    return f"{100 * statistics.fmean(xs):+6.2f}" if xs else "     —"


def report(tallies: dict[tuple[float, float], Tally]) -> None:
    print(f"{'truth':>6} {'noise':>6} {'sweeps':>6} {'confirmed':>10} {'':>6} "
          f"{'bias all':>9} {'bias conf.':>10} {'covered':>8} {'runs':>6}")
    for (gain, noise), t in tallies.items():
        what = "false" if gain < WIN else "power"
        print(f"{gain:+6.1%} {noise:6.1%} {t.n:6d} {t.confirmed / t.n:10.1%} {what:>6} "
              f"{_pts(t.errors):>9} {_pts(t.confirmed_errors):>10} {_share(t.covered):>8} "
              f"{statistics.fmean(t.runs):6.1f}")


def _share(xs: list[bool]) -> str:
    return f"{sum(xs) / len(xs):.0%}" if xs else "—"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=200, help="sweeps per (truth, noise)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--candidates", type=int, default=4, help="near-bar flags per cell")
    ap.add_argument("--spread", type=float, default=0.015,
                    help="the other near-bar flags sit 0 to this much under the truth")
    ap.add_argument("--shipped", action="store_true",
                    help="the shipped catalog (default_catalog) instead of a random one")
    ap.add_argument("--truth", type=float, action="append", help="only these truths")
    ap.add_argument("--noise", type=float, action="append", help="only these noises")
    ap.add_argument("--report-runs", type=int, default=2,
                    help="runs each of the recipe and the baseline after a proposal is "
                         "decided, its gain read from them (0: from the deciding runs)")
    ap.add_argument("--drift", type=float, default=0.0,
                    help="relative drift of every run's TGS over 8 h of queue time")
    ap.add_argument("--drift-read", choices=[r.value for r in DriftRead],
                    default=THRESHOLDS.drift.value,
                    help="how the planner's claims read the baseline (thresholds.drift)")
    ap.add_argument("--smoke", action="store_true", help="2 sweeps per case: the whole path")
    args = ap.parse_args()
    if args.smoke:
        args.sweeps = 2
    report(run(args.sweeps, args.seed, args.candidates, args.spread, args.shipped,
               tuple(args.truth or TRUTHS), tuple(args.noise or NOISES), args.report_runs,
               args.drift, DriftRead(args.drift_read)))


if __name__ == "__main__":
    main()
