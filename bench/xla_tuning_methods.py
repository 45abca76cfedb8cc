"""The methods bench/xla_tuning_efficiency.py compares (see its docstring)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sweepd.kinds.xla_tuning.catalog.catalog import (
    Parallelism,
    Profile,
    Setting,
    mechanism_order,
    stack,
)
from sweepd.kinds.xla_tuning.catalog.flags import restore_default
from sweepd.kinds.xla_tuning.catalog.landscape import Landscape, RunKind, sample
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import RUN_S as RUN_S  # set by the bench's --run-s
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS, Stop

WAVE, MAX_S, WIN, BOUND, COUNT = 8, 8 * 3600.0, 0.05, 0.02, 25


@dataclass(frozen=True)
class Claim:
    kind: str  # proposal, bounded, timebox, exhausted
    settings: tuple[Setting, ...]
    runs: int
    gain: float = 0.0  # the claimed (measured) gain of the recipe
    conditional: bool = False
    proposed: bool = True  # False: "no change" (nothing beyond noise)
    win: bool | None = None  # claims ">= +5 %" (None: the gain says it, gain >= 5 %)
    parts: tuple[tuple[Setting, ...], ...] = ()  # the recipe's parts (a stack's), as settings

    @property
    def claims_win(self) -> bool:
        return self.gain >= WIN if self.win is None else self.win


def planner(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    """The planner in its default (seed) stop mode."""
    return _planner(land, cat, rng, WIN)


def planner_thorough(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    return _planner(land, cat, rng, WIN, stop="thorough")


def planner_seed_rule(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    """Seed mode with the SKILL.md's bounded rule as it comes (`family_gaps` off): the
    sweep may end at 25 profiles with numeric family values never run."""
    return _planner(land, cat, rng, WIN, family_gaps=False)


def planner_eager(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    """The winner rule read eagerly: a confirmed +5 % recipe ends the sweep once its own
    refinements and stacks are done, before the rest of the catalog is seeded (focus=0)."""
    return _planner(land, cat, rng, WIN, focus=0)


def planner_nostop(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    """The planner with the +5 % winner rule off: it runs on to the catalog's end or 8 h."""
    return _planner(land, cat, rng, math.inf)


# How the planner's claims read the baseline (`--drift-read`; the daemon's default).
DRIFT_READ = [THRESHOLDS.drift]
BOUNDED_QUESTION = [True]  # `thresholds.bounded_question` (the CLI's --bounded-question)


def _planner(land: Landscape, cat: Sequence[Profile], rng: random.Random, win: float,
             focus: int = 99, stop: Stop = "seed", family_gaps: bool = True) -> Claim:
    inp = Inputs(Parallelism.parse(land.parallelism), tuple(cat), tags=land.tags,
                 deployed=land.deployed_settings(), win=win, focus=focus, stop=stop,
                 family_gaps=family_gaps, drift=DRIFT_READ[0],
                 bounded_question=BOUNDED_QUESTION[0])
    inp = dataclasses.replace(inp, **INPUT_SWITCHES)  # type: ignore[arg-type]
    r = replay(inp, land, rng)
    v = r.verdict
    table = profiles(inp)
    parts = tuple(table[q].settings for q in v.recipe.split("+")) if v.recipe else ()
    return Claim(str(v.kind), r.settings(inp), len(r.results), v.gain or 0.0, v.conditional,
                 v.recipe is not None, v.win, parts)


# Boolean `Inputs` fields set for every planner run of the bench (`--rule NAME=on|off`).
INPUT_SWITCHES: dict[str, bool] = {}


def set_switches(specs: Sequence[str]) -> str:
    """`NAME=on|off` each: a boolean `Inputs` field (kept in INPUT_SWITCHES for the planner's
    runs) or one of the planner's module switches (`waves/wave_rules.py`) set for this run;
    the first bad one's line ("" when all are good)."""
    from sweepd.kinds.xla_tuning.waves import wave_rules

    fields = {f.name for f in dataclasses.fields(Inputs) if f.type in (bool, "bool")}
    for spec in specs:
        name, _, value = spec.partition("=")
        if value not in ("on", "off") and not value.isdigit():
            return f"--rule {spec}: not NAME=on|off (or NAME=count)"
        if name in fields:
            INPUT_SWITCHES[name] = value == "on"
        elif isinstance(getattr(wave_rules, name, None), bool):
            setattr(wave_rules, name, value == "on")
        elif isinstance(getattr(wave_rules, name, None), int) and value.isdigit():
            setattr(wave_rules, name, int(value))  # a count (e.g. CLOSING_STACKS=2)
        else:
            return (f"--rule {spec}: {name} is neither a boolean Inputs field nor a switch "
                    "in waves/wave_rules.py")
    return ""


def _space(land: Landscape, cat: Sequence[Profile]) -> list[Profile]:
    restore = restore_default(land.deployed_settings())
    return [*cat, *([restore] if restore else [])]


def _measure(land: Landscape, settings: tuple[Setting, ...], rng: random.Random,
             runs_before: int = 0) -> float | None:
    s = sample(land, settings, land.tags[0], rng, at_s=RUN_S * runs_before)
    return s.tgs if s.kind is RunKind.OK else None


def _black_box(land: Landscape, cat: Sequence[Profile], rng: random.Random, budget: int,
               suggest: Callable[[int], tuple[str, ...]], tell: Callable[[float], None]
               ) -> Claim:
    """A recipe search over three slots (each a catalog profile or none) at a run budget:
    two baseline runs, then one run per distinct valid recipe suggested; the best single
    measurement is claimed (what a black-box optimiser reports)."""
    table = {p.name: p for p in _space(land, cat)}
    base = [x for x in (_measure(land, (), rng), _measure(land, (), rng, 1)) if x is not None]
    if not base:
        return Claim("bounded", (), 2, proposed=False)  # no baseline: nothing to compare
    b = statistics.fmean(base)
    runs, best = 2, 0.0
    best_set: tuple[Setting, ...] = ()
    seen: dict[frozenset[str], float] = {}
    for i in range(budget * 20):
        if runs >= budget:
            break
        names = tuple(dict.fromkeys(n for n in suggest(i) if n != "none"))
        prof = [table[n] for n in names]
        settings = tuple(st for p in prof for st in p.settings)
        if not names or len(settings) > 3 or len({st.key for st in settings}) < len(settings):
            tell(-0.2)  # not a recipe: no run
            continue
        key = frozenset(names)
        if key in seen:
            tell(seen[key])
            continue
        tgs = _measure(land, settings, rng, runs)
        runs += 1
        d = tgs / b - 1 if tgs is not None else -0.2
        seen[key] = d
        tell(d)
        if d > best:
            best, best_set = d, settings
    kind = "proposal" if best >= WIN else "bounded" if best <= BOUND else "exhausted"
    return Claim(kind, best_set, runs, best, proposed=bool(best_set))


def tpe(land: Landscape, cat: Sequence[Profile], rng: random.Random, budget: int) -> Claim:
    """Optuna's TPE sampler over three recipe slots, at the given run budget."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    choices = ["none", *(p.name for p in _space(land, cat))]
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=rng.randrange(2**31)))
    trial: list[optuna.trial.Trial] = []

    def suggest(_: int) -> tuple[str, ...]:
        trial[:] = [study.ask()]
        return tuple(str(trial[0].suggest_categorical(f"slot{k}", choices)) for k in range(3))

    def tell(value: float) -> None:
        study.tell(trial[0], value)

    return _black_box(land, cat, rng, budget, suggest, tell)


def random_search(land: Landscape, cat: Sequence[Profile], rng: random.Random,
                  budget: int) -> Claim:
    """Recipes of 1-3 catalog profiles drawn uniformly, at the given run budget."""
    names = [p.name for p in _space(land, cat)]

    def suggest(_: int) -> tuple[str, ...]:
        return tuple(rng.sample(names, min(len(names), rng.randint(1, 3))))

    return _black_box(land, cat, rng, budget, suggest, lambda _: None)


def _in_evidence_order(land: Landscape, space: list[Profile]) -> list[Profile]:
    """The catalog in the order the evidence's mechanisms give (what the planner knows),
    profiles without a mechanism (restore_default) first."""
    order = mechanism_order(Parallelism.parse(land.parallelism), land.evidence_value())
    ranked = sorted(range(len(space)), key=lambda i: (
        min((order.index(mm) for mm in space[i].mechanisms if mm in order),
            default=len(order)) if space[i].mechanisms else -1, i))
    return [space[i] for i in ranked]


def _measure_singles(land: Landscape, space: Sequence[Profile], rng: random.Random,
                     base: float, runs_before: int = 2) -> list[tuple[float, Profile]]:
    """Each profile measured once, after `runs_before` runs (the baseline pair): its delta
    over the baseline mean (a failed run: none)."""
    measured = []
    for i, p in enumerate(space):
        tgs = _measure(land, p.settings, rng, runs_before + i)
        if tgs is not None:
            measured.append((tgs / base - 1, p))
    return measured


def singles_oracle(land: Landscape, cat: Sequence[Profile], rng: random.Random,
                   m: int = 5, budget: int | None = None) -> Claim:
    """Every single measured once (baseline twice); the m best means of distinct flags kept;
    then TOLD every recipe of <= 3 of those m's true gain (stacking free and noise-free).
    With a run budget: only the first budget - 2 singles, in the order the evidence's
    mechanisms give (what the planner knows), restore_default first (the oracle at equal
    runs)."""
    space = _space(land, cat)
    if budget is not None:
        space = _in_evidence_order(land, space)[: max(0, budget - 2)]
    base = [x for x in (_measure(land, (), rng), _measure(land, (), rng, 1)) if x is not None]
    if not base:
        return Claim("bounded", (), len(space) + 2, proposed=False)
    b = statistics.fmean(base)
    measured = _measure_singles(land, space, rng, b)
    top: list[Profile] = []
    keys: set[str] = set()
    for d, p in sorted(measured, key=lambda dp: -dp[0]):
        if d > 0 and not p.keys & keys and len(top) < m:
            top.append(p)
            keys |= p.keys
    best = 1.0
    best_set: tuple[Setting, ...] = ()
    for k in (1, 2, 3):
        for combo in itertools.combinations(top, k):
            settings = tuple(st for p in combo for st in p.settings)
            if len(settings) > 3:
                continue
            g = land.gain(settings, land.tags[0])
            if g is not None and g > best:
                best, best_set = g, settings
    kind = "proposal" if best - 1 >= WIN else "bounded" if best - 1 <= BOUND else "exhausted"
    return Claim(kind, best_set, len(space) + 2, best - 1, proposed=bool(best_set))


def singles_measured(land: Landscape, cat: Sequence[Profile], rng: random.Random,
                     budget: int, stacks: int = 10, m: int = 5) -> Claim:
    """The singles oracle made honest at a run budget: singles in the evidence's order
    until `stacks` runs are left, then the `stacks` recipes of <= 3 of the m best singles
    predicted best (their deltas multiplied) measured once each; the best single
    measurement among the singles and stacks claimed (no truth told)."""
    return _singles_stacks(land, cat, rng, budget, stacks, m, confirm=0)


def singles_confirmed(land: Landscape, cat: Sequence[Profile], rng: random.Random,
                      budget: int, stacks: int = 10, m: int = 5) -> Claim:
    """singles+stk with an honest claim at the same budget: 4 fewer singles, and the best
    measurement re-run twice beside two new baseline runs; its gain read on those alone
    (no part tests, no Wave 6, no report block: what the planner's verdict adds)."""
    return _singles_stacks(land, cat, rng, budget, stacks, m, confirm=2)


def _singles_stacks(land: Landscape, cat: Sequence[Profile], rng: random.Random, budget: int,
                    stacks: int, m: int, confirm: int) -> Claim:
    space = _space(land, cat)
    space = _in_evidence_order(land, space)[: max(0, budget - 2 - stacks - 2 * confirm)]
    base = [x for x in (_measure(land, (), rng), _measure(land, (), rng, 1)) if x is not None]
    if not base:
        return Claim("bounded", (), 2, proposed=False)
    b = statistics.fmean(base)
    measured = _measure_singles(land, space, rng, b)
    runs = 2 + len(space)
    top: list[tuple[float, Profile]] = []
    keys: set[str] = set()
    for d, p in sorted(measured, key=lambda dp: -dp[0]):
        if d > 0 and not p.keys & keys and len(top) < m:
            top.append((d, p))
            keys |= p.keys
    combos = []
    for k in (2, 3):
        for combo in itertools.combinations(top, k):
            settings = tuple(st for _, p in combo for st in p.settings)
            if len(settings) <= 3:
                combos.append((math.prod(1 + d for d, _ in combo), settings))
    best, best_set = max(((d, p.settings) for d, p in measured), default=(0.0, ()),
                         key=lambda x: x[0])
    for _, settings in sorted(combos, key=lambda c: -c[0])[:stacks]:
        tgs = _measure(land, settings, rng, runs)
        runs += 1
        if tgs is not None and tgs / b - 1 > best:
            best, best_set = tgs / b - 1, settings
    if confirm and best > 0:
        fresh = [x for k in range(confirm)
                 if (x := _measure(land, best_set, rng, runs + k)) is not None]
        again = [x for k in range(confirm)
                 if (x := _measure(land, (), rng, runs + confirm + k)) is not None]
        runs += 2 * confirm
        best = statistics.fmean(fresh) / statistics.fmean(again or base) - 1 if fresh else 0.0
    if best <= 0:
        best_set = ()
    kind = "proposal" if best >= WIN else "bounded" if best <= BOUND else "exhausted"
    return Claim(kind, best_set, runs, max(best, 0.0), proposed=bool(best_set))


@dataclass
class _Lab:
    """Runs profiles against the landscape, counting every run (flakes retried <= 3)."""

    land: Landscape
    rng: random.Random
    runs: int = 0
    tgs: dict[str, list[float]] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)

    def run(self, p: Profile) -> None:
        for _ in range(3):
            s = sample(self.land, p.settings, self.land.tags[0], self.rng,
                       at_s=RUN_S * self.runs)
            self.runs += 1
            if s.kind is RunKind.OK and s.tgs is not None:
                self.tgs.setdefault(p.name, []).append(s.tgs)
                return
            if s.kind is not RunKind.FLAKE:
                break
        self.dead.add(p.name)

    def delta(self, name: str) -> float:
        if "baseline" not in self.tgs:
            return -1.0  # baseline-deployed never ran (it OOMs): nothing to compare with
        base = statistics.fmean(self.tgs["baseline"])
        got = self.tgs.get(name)
        return statistics.fmean(got) / base - 1 if got else -1.0

    def best(self, min_n: int) -> str | None:
        ok = [n for n, v in self.tgs.items() if n != "baseline" and len(v) >= min_n]
        return max(ok, key=self.delta, default=None)


BASE = Profile("baseline", (), frozenset())


def _claim(lab: _Lab, kind: str, table: dict[str, Profile], min_n: int) -> Claim:
    best = lab.best(min_n)
    if best is None or lab.delta(best) <= 0:
        return Claim(kind, (), lab.runs)
    return Claim(kind, table[best].settings, lab.runs, lab.delta(best))


def _stack_top(lab: _Lab, table: dict[str, Profile], min_n: int, reps: int) -> None:
    good = sorted((n for n, v in lab.tgs.items() if n != "baseline" and len(v) >= min_n
                   and lab.delta(n) > 0.01 and "+" not in n), key=lambda n: -lab.delta(n))
    for a, b in ((a, b) for i, a in enumerate(good) for b in good[i + 1:]):
        if not table[a].keys & table[b].keys and len(table[a].settings + table[b].settings) <= 3:
            s = stack((table[a], table[b]))
            if s.name not in table:
                table[s.name] = s
                for _ in range(reps):
                    lab.run(s)
            return


def literal(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    lab = _Lab(land, rng)
    table = {p.name: p for p in cat}
    restore = restore_default(land.deployed_settings())
    lab.run(BASE)
    lab.runs += 1  # the evidence run
    if restore is not None:
        table[restore.name] = restore
        lab.run(restore)
    order = mechanism_order(Parallelism.parse(land.parallelism), land.evidence_value())
    queue = [p for m in order for p in cat if m in p.mechanisms]
    queue = list({p.name: p for p in queue}.values())
    distinct = 0
    while queue:
        wave, queue = queue[:WAVE], queue[WAVE:]
        for p in wave:
            lab.run(p)
        distinct += len(wave)
        for p in wave:
            if lab.delta(p.name) > BOUND:
                lab.run(p)  # winners re-measured before being called winners
        _stack_top(lab, table, 2, 2)
        best = lab.best(2)
        if best and lab.delta(best) >= WIN:
            return _claim(lab, "proposal", table, 2)
        top = max((lab.delta(n) for n in lab.tgs if n != "baseline"), default=0.0)
        if distinct >= COUNT and top <= BOUND:
            return _claim(lab, "bounded", table, 1)
        if lab.runs * RUN_S >= MAX_S:
            return _claim(lab, "timebox", table, 1)
    top = max((lab.delta(n) for n in lab.tgs if n != "baseline"), default=0.0)
    return _claim(lab, "bounded" if top <= BOUND else "exhausted", table, 1)


def exhaustive(land: Landscape, cat: Sequence[Profile], rng: random.Random) -> Claim:
    """Every profile once (restore_default included; baseline twice); the best single of
    each of the top 3 families re-run twice (n=3); forward stacking of those (pair, then
    triple), each stack n=3 and kept only when its mean beats the leader's; the best mean of
    n >= 3 claimed."""
    lab = _Lab(land, rng)
    restore = restore_default(land.deployed_settings())
    # restore_default is a candidate of the truth and of the planner's Wave 1: run it too.
    every = (*cat, *([restore] if restore else []))
    table = {p.name: p for p in every}
    lab.run(BASE)
    lab.run(BASE)
    for p in every:
        lab.run(p)
    top: list[str] = []
    for n in sorted((n for n in lab.tgs if n != "baseline"), key=lambda n: -lab.delta(n)):
        if len(top) < 3 and not any(table[n].keys & table[t].keys for t in top):
            top.append(n)
    for n in top:
        lab.run(table[n])
        lab.run(table[n])
    _forward(lab, table, [n for n in top if lab.delta(n) > 0])
    best = lab.best(3)
    gain = lab.delta(best) if best else 0.0
    kind = "proposal" if gain >= WIN else ("bounded" if gain <= BOUND else "exhausted")
    return _claim(lab, kind, table, 3)


def _forward(lab: _Lab, table: dict[str, Profile], ranked: list[str]) -> None:
    """Greedy stacking: the leader plus the next confirmed single, kept if it is faster."""
    if not ranked:
        return
    leader = table[ranked[0]]
    for n in ranked[1:]:
        part = table[n]
        if leader.keys & part.keys or len(leader.settings) + len(part.settings) > 3:
            continue
        s = stack((leader, part))
        table[s.name] = s
        for _ in range(3):
            lab.run(s)
        if lab.delta(s.name) > lab.delta(leader.name):
            leader = s


def _smoke() -> None:
    """`--smoke`: every method once on the facts file's PP=8 cell (the whole path)."""
    import argparse

    from sweepd.kinds.xla_tuning.catalog.defaults import pp8
    from sweepd.kinds.xla_tuning.catalog.flags import default_catalog

    ap = argparse.ArgumentParser(description="the xla-tuning bench's methods")
    ap.add_argument("--smoke", action="store_true", help="each method once on PP=8")
    ap.parse_args()
    land = pp8()
    cat = default_catalog(Parallelism.parse(land.parallelism))
    thorough = planner_thorough(land, cat, random.Random(1))
    for name, claim in (("seed", planner(land, cat, random.Random(1))),
                        ("thorough", thorough), ("literal", literal(land, cat, random.Random(1))),
                        ("exhaustive", exhaustive(land, cat, random.Random(1))),
                        ("singles", singles_oracle(land, cat, random.Random(1))),
                        ("tpe", tpe(land, cat, random.Random(1), thorough.runs)),
                        ("random", random_search(land, cat, random.Random(1), thorough.runs))):
        print(f"{name:<10} {claim.kind:<9} {claim.runs:3d} runs, claimed {claim.gain:+.2%}")


if __name__ == "__main__":
    _smoke()
