"""`proposer: surrogate` (not the default): a Bayesian linear model of the board proposes
the exploring part of each wave, ranked by its upper bound, so the recipe it predicts best
is what the seed's confirmation meets first; the seed's waves, re-runs, confirmation,
report block and stop rules stay on top (`next_wave.py`).

The model: Bayesian linear regression (scikit-learn's GaussianProcessRegressor with a linear
kernel) over two indicators per catalog profile, its family's (any value of the flag) and
its own value's, so a value's run tells of its family's other values; a stack is the sum of
its parts' indicators, fitted to log(1 + search delta) of every recipe measured on the
primary tag, each read at the board's noise over its runs: stacks compound, so their parts
add in logs. A profile never run carries the
prior's width, so a stack of untried families has the widest bound: a wave packs untried
flags three to a run until the board can tell them apart; then measured parts lead. A wave's
picks are made one by one, each earlier pick read as measured at its predicted gain, so
the next goes where the model is still unsure. A profile that did not run alone (OOM,
unknown flag) is not proposed again; the parts of a stack that did not run, alone only
until one runs. Stateless: refitted from the board at each plan, deterministic."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism, Profile
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, Fate
from sweepd.kinds.xla_tuning.waves.candidates_base import CandidatesBase, Item

# The upper bound ranked by: the predicted mean plus this many posterior sd. At the default's
# run count on the tuned family (40 landscapes, seed 1): 0.25 found 12.5 %, 0.5 15 %, 1.0
# 7.5 %, 2.0 10 % (a landscape is 2.5 points: within the noise of 40, chosen on tuned only).
KAPPA = 0.5
POOL = 14  # families, best upper bound first, whose recipes of <= max_flags flags are ranked
FAMILY_SD = 0.03  # prior sd (log TGS) of setting a flag family at all: the catalog's spread
VALUE_SD = 0.02  # prior sd of one value of it on top (a numeric family's values differ)
# Exploring runs a wave: the model refits sooner. At the default's run count on the tuned
# family (40 landscapes, seed 1, KAPPA 1): 3 a wave found 10 % (share of the best's gain
# 40 %), 4 7.5 % (46 %), 8 7.5 % (30 %): at 8, a sweep the default ends on its first win
# at 13-18 runs ended before the model's leader was confirmed (KAPPA 0.5: 2 a wave 10 %,
# 3 7.5 %, 4 15 %).
WAVE = 4

Ranked = tuple[tuple[str, ...], float, float]  # parts, predicted gain, its sd


def surrogate_items(c: CandidatesBase, n: int) -> list[Item]:
    """Up to `n` recipes not yet run on the primary tag, each the best upper bound once the
    ones before it are taken as measured at their predicted gain (a batch of upper bounds:
    the next pick goes where the model is still unsure)."""
    n = min(n, WAVE)
    if n <= 0:
        return []
    out: list[Item] = []
    taken: list[tuple[tuple[str, ...], float]] = []
    for _ in range(n):
        pick = next((r for r in ranked_recipes(c, taken) if all(r[0] != t for t, _ in taken)
                     and c._ok(c._profile("+".join(r[0])))), None)
        if pick is None:
            break
        parts, mean, sd = pick
        prof = c._profile("+".join(parts))
        taken.append((parts, math.log1p(mean)))
        out.append((prof, c.primary, rule_book.SURROGATE.id,
                    f"surrogate (proposer: surrogate): {prof.name} predicted {mean:+.2%} "
                    f"+/- {sd:.2%} over {c.board.runs} runs"))
    return out


def ranked_recipes(c: CandidatesBase, taken: Sequence[tuple[tuple[str, ...], float]] = ()
                   ) -> list[Ranked]:
    """Every recipe of <= max_flags flags over the POOL families of best upper bound, with
    its predicted gain and sd (relative), best upper bound first (ties: the value nearest
    its family's middle, then by name: deterministic). `taken`: recipes read as measured at
    these log gains (the wave's picks so far)."""
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor  # only this option needs it
    from sklearn.gaussian_process.kernels import DotProduct

    parts, suspect = _parts(c)
    if not parts:
        return []
    fams = sorted({p.family or p.name for p in parts})
    col = {f: len(parts) + i for i, f in enumerate(fams)}
    index = {p.name: i for i, p in enumerate(parts)}

    def row(pieces: Sequence[str]) -> list[float]:
        x = [0.0] * (len(parts) + len(fams))
        for name in pieces:
            p = parts[index[name]]
            x[index[name]] = VALUE_SD
            x[col[p.family or p.name]] = FAMILY_SD
        return x

    noise = max(c.board.noise, 1e-4) ** 2
    rows, ys, var = [], [], []
    for (name, tag), e in c.board.entries.items():
        pieces = name.split("+")
        d = c.board.search_delta(name, tag) if e.n else None
        if tag != c.primary or d is None or any(p not in index for p in pieces):
            continue
        rows.append(row(pieces))
        ys.append(math.log1p(d))
        var.append(noise / e.n)
    for parts_taken, y in taken:
        rows.append(row(parts_taken))
        ys.append(y)
        var.append(noise)
    # Bayesian linear regression as a GP with a linear kernel over features scaled by their
    # prior sd, the priors and each result's noise (the board's over its runs) fixed: too
    # few runs to learn them, and a learnt prior made untried flags as certain as measured.
    model = GaussianProcessRegressor(DotProduct(0.0, "fixed"),
                                     alpha=np.array(var) if var else 1e-10, optimizer=None)
    if rows:
        model.fit(np.array(rows), np.array(ys))
    mean, sd = model.predict(np.array([row([p.name]) for p in parts]), return_std=True)
    ucb = mean + KAPPA * sd
    middle = {p.name: abs(p.position - _size(c, p) // 2) for p in parts}
    best_of: dict[str, int] = {}
    for i in sorted(range(len(parts)),
                    key=lambda i: (-round(ucb[i], 9), middle[parts[i].name], parts[i].name)):
        best_of.setdefault(parts[i].family or parts[i].name, i)
    pool = list(best_of.values())[:POOL]
    combos: list[tuple[int, ...]] = []
    for k in range(1, c.inp.max_flags + 1):
        for combo in itertools.combinations(pool, k):
            settings = [s for i in combo for s in parts[i].settings]
            if (len(settings) <= c.inp.max_flags and len({s.key for s in settings})
                    == len(settings) and not (k > 1 and any(parts[i].name in suspect
                                                            for i in combo))):
                combos.append(combo)
    singles = [(i,) for i in range(len(parts)) if i not in pool]  # every other value alone
    combos += singles
    m, v = model.predict(np.array([row([parts[i].name for i in cb]) for cb in combos]),
                         return_std=True)
    out = [(tuple(sorted(parts[i].name for i in cb)), float(m[r]), float(v[r]),
            sum(middle[parts[i].name] for i in cb)) for r, cb in enumerate(combos)]
    out.sort(key=lambda t: (-round(t[1] + KAPPA * t[2], 9), t[3], t[0]))
    return [(names, math.expm1(mu), sd_) for names, mu, sd_, _ in out]


def _size(c: CandidatesBase, p: Profile) -> int:
    return sum(1 for q in c.table.values() if (q.family or q.name) == (p.family or p.name))


def _parts(c: CandidatesBase) -> tuple[list[Profile], set[str]]:
    """The profiles a recipe may hold (catalog singles, restore_default included; no
    pipeline shape, Wave 5's; none that did not run alone on the primary tag), and the
    suspects: parts of a stack that did not run (OOM, unknown flag), never since measured,
    which run alone first (one of three flags failed the stack: the other two did not)."""
    bad: set[str] = set()
    suspect: set[str] = set()
    fine: set[str] = set()
    for (name, tag), e in c.board.entries.items():
        if tag != c.primary:
            continue
        pieces = name.split("+")
        if e.fate is Fate.MEASURED:
            fine.update(pieces)
        elif e.fate is not Fate.OPEN:
            (suspect if len(pieces) > 1 else bad).update(pieces)
    parts = sorted((p for p in c.table.values() if p.name not in (BASELINE, EVIDENCE)
                    and Mechanism.PIPELINE not in p.mechanisms and p.name not in bad
                    and not (p.keys & c.unknown)), key=lambda p: p.name)
    return parts, suspect - fine
