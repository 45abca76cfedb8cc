"""Random flag-effect landscapes for bench/xla_tuning_efficiency.py (not a test).

Three generators. `tuned` is the family the planner's constants were chosen against:
winners sit (70 %) in a mechanism the evidence run points at, numeric families have one
smooth optimum. `heldout` was written afterwards and never tuned against: winners anywhere,
numeric effects that jump between neighbouring values, a winner that may sit only at an
extreme value, more interactions (some stacks only win together), a harmful env-file flag.
`fresh` (see generate_fresh) was written with the second planner round, before any result
on it was seen, and is not tuned against either.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from sweepd.kinds.xla_tuning.catalog.catalog import (
    COST_MECHANISMS,
    Cost,
    Layer,
    Mechanism,
    Parallelism,
    Profile,
    Setting,
    applies,
)
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Interaction, Landscape, truth

Case = tuple[Landscape, tuple[Profile, ...]]


def _catalog(rng: random.Random, par: Parallelism) -> tuple[Profile, ...]:
    """30-60 profiles: families of one to seven values over the applicable mechanisms."""
    mechs = [m for m in Mechanism if applies(m, par) and m is not Mechanism.PIPELINE]
    target = rng.randint(30, 60)
    out: list[Profile] = []
    i = 0
    while len(out) < target:
        mech = rng.choice(mechs)
        size = rng.choice((1, 1, 1, 2, 3, 4, 5, 7))
        size = min(size, target - len(out))
        key = f"xla_gpu_fake_{i}" if rng.random() < 0.8 else f"FAKE_ENV_{i}"
        layer = Layer.XLA if key.startswith("xla") else Layer.ENV
        for pos in range(size):
            value = str(2**pos) if size > 1 else "true"
            name = f"f{i}v{value}" if size > 1 else f"f{i}"
            out.append(Profile(name, (Setting(key, value, layer),), frozenset({mech}),
                               family=f"f{i}", position=pos))
        i += 1
    return tuple(out)


def _families(cat: tuple[Profile, ...]) -> dict[str, list[Profile]]:
    fams: dict[str, list[Profile]] = {}
    for p in cat:
        fams.setdefault(p.family, []).append(p)
    return fams


def _evidence(rng: random.Random) -> dict[Cost, float]:
    costs = [c for c in Cost if c is not Cost.COMPUTE]
    top = rng.sample(costs, 3)
    return {top[0]: 0.4, top[1]: 0.15, top[2]: 0.05, Cost.COMPUTE: 0.4}


def _curve_smooth(rng: random.Random, n: int, peak: float) -> list[float]:
    at = rng.randrange(n)
    width = rng.uniform(1.0, 3.0)
    return [peak * math.exp(-(((i - at) / width) ** 2)) for i in range(n)]


def _curve_jumpy(rng: random.Random, n: int, peak: float) -> list[float]:
    at = rng.choice((0, n - 1)) if rng.random() < 0.5 else rng.randrange(n)
    return [peak if i == at else peak * rng.uniform(-0.6, 0.6) for i in range(n)]


def generate(rng: random.Random, heldout: bool) -> Case:
    par = Parallelism.parse(rng.choice(("FSDP=8", "PP=8", "TP=8", "PP=4,FSDP=2")))
    cat = _catalog(rng, par)
    fams = _families(cat)
    evidence = _evidence(rng)
    lead = max(evidence, key=lambda c: (c is not Cost.COMPUTE, evidence[c]))
    hot = set(COST_MECHANISMS[lead])
    effects: dict[str, Effect] = {}
    for fam in fams.values():  # background: mostly small, some clearly harmful
        u = rng.random()  # most flags do little; a quarter hurt; a few help a little
        base = (rng.uniform(-0.004, 0.004) if u < 0.6 else -rng.uniform(0.01, 0.07) if u < 0.85
                else rng.uniform(0.005, 0.03))
        curve = (_curve_jumpy if heldout else _curve_smooth)(rng, len(fam), base)
        for p, e in zip(fam, curve, strict=True):
            effects[p.settings[0].label] = Effect(tgs=1 + e)
    names = list(fams)
    winners: list[str] = []
    for w in rng.sample(names, rng.choice((0, 1, 1, 2, 2, 3))):
        if not heldout and rng.random() < 0.7:
            pool = [f for f, ps in fams.items() if ps[0].mechanisms & hot] or names
            w = rng.choice(pool)
        winners.append(w)
        peak = rng.uniform(0.05, 0.15)
        curve = (_curve_jumpy if heldout else _curve_smooth)(rng, len(fams[w]), peak)
        for p, e in zip(fams[w], curve, strict=True):
            effects[p.settings[0].label] = Effect(tgs=1 + e)
    _hazards(rng, cat, effects)
    unknown = frozenset(rng.choice(cat).settings[0].key for _ in range(rng.randint(0, 2)))
    interactions = _interactions(rng, cat, winners, fams, heldout)
    deployed = tuple(rng.choice(cat).settings[0].label for _ in range(rng.randint(0, 2)))
    land = Landscape(
        parallelism=par.text, tags=("default",), base_tgs={"default": 1000.0},
        effects=effects, interactions=interactions, unknown=unknown - {
            d.partition("=")[0] for d in deployed},
        deployed=tuple(dict.fromkeys(deployed)), noise=0.008, flake_rate=0.03,
        evidence=evidence,
    )
    return land, cat


def _hazards(rng: random.Random, cat: tuple[Profile, ...], effects: dict[str, Effect]) -> None:
    for p in rng.sample(list(cat), rng.randint(0, 3)):  # some profiles do not fit
        label = p.settings[0].label
        effects[label] = Effect(tgs=effects[label].tgs, mem=rng.uniform(1.3, 1.8))


def _interactions(rng: random.Random, cat: tuple[Profile, ...], winners: list[str],
                  fams: dict[str, list[Profile]], heldout: bool) -> tuple[Interaction, ...]:
    out = []
    if len(winners) >= 2:  # winners that share a bottleneck do not add up
        a, b = rng.sample(winners, 2)
        out.append(Interaction(members=(fams[a][0].settings[0].key, fams[b][0].settings[0].key),
                               tgs=rng.uniform(0.93, 1.0)))
    for _ in range(rng.randint(0, 3 if heldout else 1)):
        p, q = rng.sample(list(cat), 2)
        if p.settings[0].key != q.settings[0].key:
            tgs = rng.uniform(1.03, 1.08) if heldout and rng.random() < 0.4 else \
                rng.uniform(0.95, 1.0)
            out.append(Interaction(members=(p.settings[0].label, q.settings[0].label), tgs=tgs))
    return tuple(out)


GENERATORS: dict[str, Callable[[random.Random], Case]] = {
    "tuned": lambda rng: generate(rng, heldout=False),
    "heldout": lambda rng: generate(rng, heldout=True),
}


# `fresh`: a third family, written (with the planner changes of the noise/endgame round) before
# any result on it was looked at, and never tuned against. What differs from both others: the
# run-to-run noise is drawn per cell (0.4-1.2 %, the SKILL.md's "~0.3-1 %" and a worse one),
# flakes 0-6 %; numeric families rise to a plateau or flip sign along their values (the
# facts' ag+rs 384 MiB +11.5 % vs 4 GiB -4.4 %); winners are smaller (+3..+12 %), half of them
# where the evidence points; a small helper may turn harmful next to a winner (the dense
# path's async priority); the best value of a winner may not fit in memory.
def _curve_fresh(rng: random.Random, n: int, peak: float) -> list[float]:
    if n == 1:
        return [peak]
    if rng.random() < 0.5:  # rises to a plateau from either end
        up = [peak * min(1.0, (i + 1) / rng.uniform(1.0, n)) for i in range(n)]
        return up if rng.random() < 0.5 else up[::-1]
    at = rng.randrange(n)  # one good value, the far end of the family hurts
    return [peak * (1 - 0.6 * abs(i - at)) if abs(i - at) <= 1 else -abs(peak) * 0.4
            for i in range(n)]


def generate_fresh(rng: random.Random) -> Case:
    par = Parallelism.parse(rng.choice(("FSDP=8", "PP=8", "TP=8", "PP=2,FSDP=4", "FSDP=4,TP=2")))
    cat = _catalog(rng, par)
    fams = _families(cat)
    evidence = _evidence(rng)
    lead = max(evidence, key=lambda c: (c is not Cost.COMPUTE, evidence[c]))
    hot = set(COST_MECHANISMS[lead])
    effects: dict[str, Effect] = {}
    for fam in fams.values():
        u = rng.random()
        base = (rng.uniform(-0.003, 0.003) if u < 0.5 else -rng.uniform(0.01, 0.06) if u < 0.8
                else rng.uniform(0.003, 0.02))
        for p, e in zip(fam, _curve_fresh(rng, len(fam), base), strict=True):
            effects[p.settings[0].label] = Effect(tgs=1 + e)
    names = list(fams)
    winners: list[str] = []
    for w in rng.sample(names, rng.choice((0, 1, 1, 1, 2, 2, 3))):
        if rng.random() < 0.5:
            pool = [f for f, ps in fams.items() if ps[0].mechanisms & hot] or names
            w = rng.choice(pool)
        if w in winners:
            continue
        winners.append(w)
        curve = _curve_fresh(rng, len(fams[w]), rng.uniform(0.03, 0.12))
        for p, e in zip(fams[w], curve, strict=True):
            effects[p.settings[0].label] = Effect(tgs=1 + e)
        if len(fams[w]) > 2 and rng.random() < 0.3:  # its best value may not fit
            top = max(fams[w], key=lambda p: effects[p.settings[0].label].tgs)
            effects[top.settings[0].label] = Effect(tgs=effects[top.settings[0].label].tgs,
                                                    mem=1.6)
    _hazards(rng, cat, effects)
    inter: list[Interaction] = []
    if len(winners) >= 2:
        a, b = rng.sample(winners, 2)
        inter.append(Interaction(members=(fams[a][0].settings[0].key,
                                          fams[b][0].settings[0].key),
                                 tgs=rng.uniform(0.92, 1.0)))
    helpers = [p for p in cat if 1.0 < effects[p.settings[0].label].tgs < 1.03]
    if winners and helpers and rng.random() < 0.5:  # a helper that hurts next to a winner
        h = rng.choice(helpers)
        w0 = fams[winners[0]][0].settings[0].key
        if h.settings[0].key != w0:
            inter.append(Interaction(members=(h.settings[0].label, w0),
                                     tgs=rng.uniform(0.96, 0.99)))
    return _landscape(rng, par, cat, effects, inter, evidence, (0.004, 0.012), 0.06), cat


def _landscape(rng: random.Random, par: Parallelism, cat: Sequence[Profile],
               effects: dict[str, Effect], inter: list[Interaction], evidence: dict[Cost, float],
               noise: tuple[float, float], most_flakes: float) -> Landscape:
    """A random family's cell from its effects: 0-2 flags the image refuses, 0-2 deployed,
    noise and flake rate drawn in the ranges given (in this order: the seeds' cells)."""
    unknown = frozenset(rng.choice(cat).settings[0].key for _ in range(rng.randint(0, 2)))
    deployed = tuple(rng.choice(cat).settings[0].label for _ in range(rng.randint(0, 2)))
    return Landscape(
        parallelism=par.text, tags=("default",), base_tgs={"default": 1000.0},
        effects=effects, interactions=tuple(inter),
        unknown=unknown - {d.partition("=")[0] for d in deployed},
        deployed=tuple(dict.fromkeys(deployed)), noise=rng.uniform(*noise),
        flake_rate=rng.uniform(0.0, most_flakes), evidence=evidence,
    )


GENERATORS["fresh"] = generate_fresh


# `factsheld`: cells built from the facts file's two real cells (defaults.py), written for
# issue 21 and run once, for the final figure only (its seed was never looked at while the
# planner changed). Each cell takes FSDP=8 or PP=8, either tag as the primary, scales every
# measured effect by 0.4-1.4 (sign kept; 10 % flipped: a sign flip of another config or
# image), deploys the env file's 1 GiB all-gather flag (and sometimes mem .95) or nothing,
# and draws the cell's noise (0.5-1.0 %) and flakes (0-5 %).
def generate_facts(rng: random.Random) -> Case:
    from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8, pp8
    from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, MEM_FRACTION, default_catalog

    land = fsdp8() if rng.random() < 0.5 else pp8()
    tags = land.tags if rng.random() < 0.5 else tuple(reversed(land.tags))

    def scaled(e: Effect) -> Effect:
        f = rng.uniform(0.4, 1.4) * (-1 if rng.random() < 0.1 else 1)
        return Effect(tgs=1 + (e.tgs - 1) * f, mem=e.mem)

    effects = {k: scaled(e) for k, e in land.effects.items()}
    tag_effects = {t: {k: scaled(e) for k, e in es.items()} for t, es in land.tag_effects.items()}
    deployed = rng.choice(((), (f"{AG}={GIB}",), (f"{AG}={GIB}", f"{MEM_FRACTION}=.95")))
    cell = land.model_copy(update={
        "tags": tags, "effects": effects, "tag_effects": tag_effects, "deployed": deployed,
        "noise": rng.uniform(0.005, 0.010), "flake_rate": rng.uniform(0.0, 0.05)})
    return cell, default_catalog(Parallelism.parse(cell.parallelism))


GENERATORS["factsheld"] = generate_facts


# `unseen`: written after the planner changes of issue 21's last round and run once, for its
# figure only (seed 7, never used by any other run of this bench). Structurally unlike the
# other families: the shipped catalog (`default_catalog`) on a cell of any of four
# parallelisms (TP=8 and PP=4,FSDP=2 have no facts-file cell), each flag's effect drawn
# from the facts file's measured deltas (positives +1.7..+13.3 %, negatives -1.3..-5.3 %)
# wherever it sits in the catalog, so the evidence's order says nothing of where a winner
# is; the dense tag's effects a 0.5-2x multiple of the sparse one's, and half the time one
# helper that turns harmful there (the dense path's async priority, -2.7 %), so Wave 6
# decides; two profiles that do not fit (the pipelined all-gather / all-reduce OOMs); the
# env file's all-gather threshold of 1 GiB deployed or not, worth -6.6 %, -1.0 % or +5.8 %;
# noise 0.3-1.0 %, flakes 0-4 %.
POSITIVE_FACTS = (0.116, 0.0426, 0.0338, 0.0172, 0.0176, 0.0334, 0.133, 0.047)
NEGATIVE_FACTS = (-0.0134, -0.0198, -0.0269, -0.0414, -0.0519, -0.0531, -0.0353, -0.0174)


def generate_unseen(rng: random.Random) -> Case:
    from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, default_catalog

    par = Parallelism.parse(rng.choice(("FSDP=8", "PP=8", "TP=8", "PP=4,FSDP=2")))
    cat = tuple(p for p in default_catalog(par) if Mechanism.PIPELINE not in p.mechanisms)
    labels = sorted({s.label for p in cat for s in p.settings})
    effects: dict[str, Effect] = {}
    for lb in labels:
        u = rng.random()
        d = (rng.uniform(-0.003, 0.003) if u < 0.55
             else rng.choice(NEGATIVE_FACTS) * rng.uniform(0.5, 1.3) if u < 0.85
             else rng.choice(POSITIVE_FACTS[:6]) * rng.uniform(0.2, 0.6))
        effects[lb] = Effect(tgs=1 + d)
    for lb in rng.sample(labels, rng.choice((0, 1, 1, 2))):  # winners of the facts' size
        effects[lb] = Effect(tgs=1 + rng.choice(POSITIVE_FACTS) * rng.uniform(0.6, 1.2))
    for p in rng.sample(list(cat), 2):  # do not fit
        lb = p.settings[0].label
        effects[lb] = Effect(tgs=effects[lb].tgs, mem=1.7)
    dense = {lb: Effect(tgs=1 + (e.tgs - 1) * rng.uniform(0.5, 2.0), mem=e.mem)
             for lb, e in effects.items()}
    helpers = [lb for lb, e in effects.items() if 1.003 < e.tgs < 1.03]
    if helpers and rng.random() < 0.5:
        dense[rng.choice(helpers)] = Effect(tgs=0.973)
    deployed: tuple[str, ...] = ()
    if rng.random() < 0.5:
        deployed = (f"{AG}={GIB}",)
        worth = rng.choice((-0.066, -0.010, 0.058))
        effects[f"{AG}={GIB}"] = Effect(tgs=1 + worth)
        dense[f"{AG}={GIB}"] = Effect(tgs=1 + worth * rng.uniform(0.5, 2.0))
    land = Landscape(
        parallelism=par.text, tags=("sparse", "dense"),
        base_tgs={"sparse": 1000.0, "dense": 1100.0}, effects=effects,
        tag_effects={"dense": dense}, deployed=deployed, noise=rng.uniform(0.003, 0.010),
        flake_rate=rng.uniform(0.0, 0.04), evidence=_evidence(rng))
    return land, cat


GENERATORS["unseen"] = generate_unseen


# `lone`: the red-team shape behind `family_gaps` (so tuned on, not held out): the shipped
# catalog on FSDP=8, PP=8 or TP=8; every flag within noise (-0.6..+0.4 %); one numeric
# family's single value helps on its own (+3.5..+8 %, at an end or inside), its other
# values falling away from it by up to 3 % over the family, so the local slope from the
# value first tried leads away from it.
def generate_lone(rng: random.Random) -> Case:
    from sweepd.kinds.xla_tuning.catalog.flags import default_catalog

    par = Parallelism.parse(rng.choice(("FSDP=8", "PP=8", "TP=8")))
    cat = tuple(p for p in default_catalog(par) if Mechanism.PIPELINE not in p.mechanisms)
    effects = {s.label: Effect(tgs=1 + rng.uniform(-0.006, 0.004))
               for p in cat for s in p.settings}
    fams = [ms for ms in _families(cat).values() if len(ms) > 1]
    fam = rng.choice(fams)
    at, gain, slope = rng.randrange(len(fam)), rng.uniform(0.035, 0.08), rng.uniform(0, 0.03)
    for i, p in enumerate(fam):
        d = gain if i == at else -slope * abs(i - at) / (len(fam) - 1)
        effects[p.settings[0].label] = Effect(tgs=1 + d + rng.uniform(-0.003, 0.003))
    land = Landscape(
        parallelism=par.text, tags=("sparse", "dense"),
        base_tgs={"sparse": 1000.0, "dense": 1100.0}, effects=effects,
        noise=rng.uniform(0.005, 0.010), evidence=_evidence(rng))
    return land, cat


GENERATORS["lone"] = generate_lone



# `subbar`: cells where no recipe reaches the +5 % bar (issue 43), written before any result
# on them was seen: the shipped catalog on PP=8 or FSDP=8, 880-second jobs (the 8 h stop at
# ~33 runs). One numeric family of three or more values holds two good values (the best
# +3.0..+3.8 %, another 0.4-1.0 points under it; in a family of three the third -1.5..-4 %,
# as the real cell's overlap limit 4, in a longer one the good values adjacent and the rest
# falling off 1-1.5 points a value away from them). One boolean helper (+0.8..+1.8 % alone)
# stacks with the best value to +4.2..+4.7 % and with the other good value for less (a
# scheduler knob that pairs with one overlap limit). A decoy single (+1.5..+2.8 %) adds
# little or nothing on the family or on the helper (x0.965 to x0.98 together). Everything
# else is within noise or harms. The evidence run points at the family's mechanism four
# times in five. Noise 0.5-1.0 %, flakes 0-3 %, one config tag or two (the second's
# effects alike). Redrawn until the best recipe of <= 3 flags is under +4.95 %.
SUBBAR_RUN_S = 880.0


def generate_subbar(rng: random.Random) -> Case:
    while True:
        case = _subbar_once(rng)
        best = truth(case[0], case[1])
        if best.gain < 1.0495:
            return case


def _subbar_once(rng: random.Random) -> Case:
    from sweepd.kinds.xla_tuning.catalog.flags import default_catalog

    par = Parallelism.parse(rng.choice(("PP=8", "FSDP=8")))
    cat = tuple(p for p in default_catalog(par) if Mechanism.PIPELINE not in p.mechanisms)
    effects: dict[str, Effect] = {}
    for p in cat:
        for s in p.settings:
            u = rng.random()
            d = (rng.uniform(-0.004, 0.0025) if u < 0.7 else -rng.uniform(0.01, 0.05))
            effects[s.label] = Effect(tgs=1 + d)
    fams = [ms for ms in _families(cat).values()
            if len(ms) >= 3 and all(len(m.settings) == 1 for m in ms)]
    fam = rng.choice(fams)
    at = rng.randrange(len(fam))
    g1 = rng.uniform(0.030, 0.038)
    g2 = g1 - rng.uniform(0.004, 0.010)
    if len(fam) == 3:  # the overlap limit's shape: two good values apart, one that harms
        other = rng.choice([i for i in range(3) if i != at])
        curve = [g1 if i == at else g2 if i == other else -rng.uniform(0.015, 0.04)
                 for i in range(3)]
    else:  # a threshold's: a good value beside the best, falling off away from them
        other = at + 1 if at + 1 < len(fam) and (at == 0 or rng.random() < 0.5) else at - 1
        curve = [g1 if i == at else g2 if i == other
                 else g2 - rng.uniform(0.01, 0.015) * min(abs(i - at), abs(i - other))
                 for i in range(len(fam))]
    for p, d in zip(fam, curve, strict=True):
        effects[p.settings[0].label] = Effect(tgs=1 + d)
    fkey = fam[0].settings[0].key
    singles = [p for p in cat if len(p.settings) == 1 and not p.family.startswith("lhs")
               and len(_families(cat)[p.family]) == 1 and p.settings[0].key != fkey]
    helper, decoy = rng.sample(singles, 2)
    h = rng.uniform(0.008, 0.018)
    effects[helper.settings[0].label] = Effect(tgs=1 + h)
    effects[decoy.settings[0].label] = Effect(tgs=1 + rng.uniform(0.015, 0.028))
    best_l, other_l = fam[at].settings[0].label, fam[other].settings[0].label
    stacked = rng.uniform(0.042, 0.047)
    inter = (
        Interaction(members=(best_l, helper.settings[0].label),
                    tgs=(1 + stacked) / ((1 + g1) * (1 + h))),
        Interaction(members=(other_l, helper.settings[0].label), tgs=rng.uniform(0.985, 0.995)),
        Interaction(members=(fkey, decoy.settings[0].key), tgs=rng.uniform(0.965, 0.98)),
        Interaction(members=(helper.settings[0].key, decoy.settings[0].key),
                    tgs=rng.uniform(0.965, 0.98)),
    )
    tags = ("sparse",) if rng.random() < 0.5 else ("sparse", "dense")
    land = Landscape(
        parallelism=par.text, tags=tags, base_tgs={t: 1000.0 for t in tags},
        effects=effects, interactions=inter, noise=rng.uniform(0.005, 0.010),
        flake_rate=rng.uniform(0.0, 0.03), evidence=_pointing(rng, fam[0]))
    return land, cat


def _pointing(rng: random.Random, p: Profile) -> dict[Cost, float]:
    """The evidence run's costs, led (four times in five) by a cost whose mechanisms hold
    the family's, as the real cell's profile pointed at its scheduler flags."""
    ev = _evidence(rng)
    leads = [c for c in Cost if c is not Cost.COMPUTE and set(COST_MECHANISMS[c]) & p.mechanisms]
    if leads and rng.random() < 0.8:
        lead = rng.choice(leads)
        top = max((c for c in ev if c is not Cost.COMPUTE), key=lambda c: ev[c])
        ev[top], ev[lead] = ev.get(lead, 0.0), ev[top]
        ev = {c: v for c, v in ev.items() if v > 0}
    return ev


# `latest`: written after the `surrogate` proposer (issue 43, item 0), before any result on
# it was seen, never tuned on. Kept apart from GENERATORS (the efficiency bench's families)
# and run by bench/xla_tuning_tpe_waves.py. What differs from the other families: 20-45
# profiles; a winner's effect falls off linearly over its family's values (a ridge, not a
# bump); winners (+4..+10 %) sit anywhere, one in three where the evidence points; two small
# helpers (+0.5..+2 % alone) stack to more than their sum (x1.02-1.05 together, a synergy a
# forward selection from the best single misses) and one of them hurts beside the first
# winner a third of the time; winners sharing a bottleneck do not add up (x0.93-0.99);
# noise 0.5-1.0 %, flakes 0-4 %.
def generate_latest(rng: random.Random) -> Case:
    par = Parallelism.parse(rng.choice(("FSDP=8", "PP=8", "TP=8", "PP=4,FSDP=2", "FSDP=4,TP=2")))
    cat = tuple(p for p in _catalog(rng, par))[: rng.randint(20, 45)]
    fams = _families(cat)
    evidence = _evidence(rng)
    lead = max(evidence, key=lambda c: (c is not Cost.COMPUTE, evidence[c]))
    hot = set(COST_MECHANISMS[lead])
    effects: dict[str, Effect] = {}
    for fam in fams.values():
        u = rng.random()
        base = (rng.uniform(-0.004, 0.004) if u < 0.55 else -rng.uniform(0.01, 0.05) if u < 0.85
                else rng.uniform(0.003, 0.015))
        for p in fam:
            effects[p.settings[0].label] = Effect(tgs=1 + base * rng.uniform(0.6, 1.2))
    names = list(fams)
    winners: list[str] = []
    for w in rng.sample(names, min(len(names), rng.choice((0, 1, 1, 2, 2, 3)))):
        if rng.random() < 1 / 3:
            pool = [f for f, ps in fams.items() if ps[0].mechanisms & hot] or names
            w = rng.choice(pool)
        if w in winners:
            continue
        winners.append(w)
        peak, at = rng.uniform(0.04, 0.10), rng.randrange(len(fams[w]))
        for i, p in enumerate(fams[w]):
            d = peak * (1 - 0.35 * abs(i - at)) if abs(i - at) < 3 else -0.01
            effects[p.settings[0].label] = Effect(tgs=1 + d)
    _hazards(rng, cat, effects)
    inter: list[Interaction] = []
    if len(winners) >= 2:
        a, b = rng.sample(winners, 2)
        inter.append(Interaction(members=(fams[a][0].settings[0].key,
                                          fams[b][0].settings[0].key),
                                 tgs=rng.uniform(0.93, 0.99)))
    others = [f for f in names if f not in winners]
    if len(others) >= 2:
        h1, h2 = (fams[f][len(fams[f]) // 2] for f in rng.sample(others, 2))
        for h in (h1, h2):
            effects[h.settings[0].label] = Effect(tgs=1 + rng.uniform(0.005, 0.02))
        inter.append(Interaction(members=(h1.settings[0].label, h2.settings[0].label),
                                 tgs=rng.uniform(1.02, 1.05)))
        if winners and rng.random() < 1 / 3:
            inter.append(Interaction(members=(h1.settings[0].label,
                                              fams[winners[0]][0].settings[0].key),
                                     tgs=rng.uniform(0.96, 0.99)))
    return _landscape(rng, par, cat, effects, inter, evidence, (0.005, 0.010), 0.04), cat


LATEST: dict[str, Callable[[random.Random], Case]] = {"latest": generate_latest}


# Apart from GENERATORS, so that the benches that run every family print what they did
# (bench/xla_tuning_subbar.py runs it).
SUBBAR: dict[str, Callable[[random.Random], Case]] = {"subbar": generate_subbar}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="the xla-tuning bench's landscape families")
    ap.add_argument("--smoke", action="store_true", help="one landscape of each family")
    ap.parse_args()
    for fam, gen in GENERATORS.items():
        land, cat = gen(random.Random(0))
        print(f"{fam:<10} {land.parallelism:<12} {len(cat)} profiles, noise {land.noise:.2%}")
