"""The flag catalog (xla-tuning-facts.md "Flag catalog by dominant cost") and parallelism parsing.

A profile is one or more settings (XLA flags, env vars, MaxText overrides) tried together. A
numeric family (a combine threshold, an overlap limit) is one profile per value, in value
order, so the planner can search along it instead of running every value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from sweepd.kinds.spec import axes_text, parse_axes


class Axis(StrEnum):
    FSDP = "FSDP"
    PP = "PP"
    TP = "TP"


class Mechanism(StrEnum):
    COMBINE = "collective combining"
    OVERLAP = "cross-iteration overlap"
    SCHEDULER = "async scheduling"
    P2P = "pipeline point-to-point"
    MATMUL = "collective matmul"
    TRANSPORT = "NCCL/RCCL transport"
    MEMORY = "memory"
    PIPELINE = "pipeline shape"


class Cost(StrEnum):
    """What an evidence run can show dominating the step (HLO collectives, xplane summary)."""

    ALL_GATHER = "all-gather (DCN)"
    REDUCE_SCATTER = "reduce-scatter (DCN)"
    ALL_REDUCE = "all-reduce"
    COLLECTIVE_PERMUTE = "collective-permute / send-recv"
    ICI_COLLECTIVES = "ICI all-gather / reduce-scatter"
    ALL_TO_ALL = "all-to-all"
    BUBBLE = "pipeline bubble"
    COMPUTE = "compute"


class Layer(StrEnum):
    XLA = "xla"  # appended to the inherited XLA_FLAGS (last wins)
    ENV = "env"  # exported after the toolkit's NCCL block
    MAXTEXT = "maxtext"  # a MaxText override on the command line


# Which mechanisms address each cost, most direct first (SKILL.md mechanism cheatsheet).
COST_MECHANISMS: dict[Cost, tuple[Mechanism, ...]] = {
    Cost.ALL_GATHER: (Mechanism.COMBINE, Mechanism.OVERLAP, Mechanism.TRANSPORT),
    Cost.REDUCE_SCATTER: (Mechanism.COMBINE, Mechanism.OVERLAP, Mechanism.TRANSPORT),
    Cost.ALL_REDUCE: (Mechanism.OVERLAP, Mechanism.TRANSPORT),
    Cost.COLLECTIVE_PERMUTE: (Mechanism.SCHEDULER, Mechanism.P2P, Mechanism.TRANSPORT),
    Cost.ICI_COLLECTIVES: (Mechanism.MATMUL, Mechanism.COMBINE, Mechanism.SCHEDULER),
    Cost.ALL_TO_ALL: (Mechanism.TRANSPORT, Mechanism.SCHEDULER),
    Cost.BUBBLE: (Mechanism.PIPELINE,),
    Cost.COMPUTE: (Mechanism.MEMORY, Mechanism.SCHEDULER),
}
# The dominant cost of each axis when no evidence says otherwise (SKILL.md catalog headings).
DOMINANT_COST: dict[Axis, tuple[Cost, ...]] = {
    Axis.FSDP: (Cost.ALL_GATHER, Cost.REDUCE_SCATTER),
    Axis.PP: (Cost.COLLECTIVE_PERMUTE, Cost.BUBBLE),
    Axis.TP: (Cost.ICI_COLLECTIVES,),
}


@dataclass(frozen=True)
class Parallelism:
    axes: tuple[tuple[Axis, int], ...]

    @classmethod
    def parse(cls, text: str, ranks: int | None = None) -> Parallelism:
        """`FSDP=8`, `PP=4,FSDP=2`; with `ranks`, the axes must multiply to it."""
        made = cls(tuple((Axis(a), n) for a, n in parse_axes(text).items()))
        if ranks is not None and made.ranks != ranks:
            raise ValueError(f"parallelism {text!r} multiplies to {made.ranks}, not {ranks} ranks")
        return made

    @property
    def ranks(self) -> int:
        return math.prod(n for _, n in self.axes)

    @property
    def text(self) -> str:
        return axes_text(dict(self.axes))

    def degree(self, axis: Axis) -> int:
        return next((n for a, n in self.axes if a is axis), 1)

    def ordered_axes(self) -> tuple[Axis, ...]:
        """Axes of degree > 1, largest first (the dominant axis, then the secondary)."""
        live = [(a, n) for a, n in self.axes if n > 1]
        return tuple(a for a, _ in sorted(live, key=lambda an: -an[1]))


@dataclass(frozen=True)
class Evidence:
    """What the Wave 1.5 run showed: each cost's share of the step, and where it was read.
    `collectives`: the collective ops its HLO dump holds per step (None: not read from a
    dump, e.g. a landscape's figures); 0 is a finding, the program has none to tune."""

    shares: tuple[tuple[Cost, float], ...]
    source: str = ""
    collectives: int | None = None

    def dominant(self) -> tuple[Cost, ...]:
        """Costs a flag can move, largest share first (compute is what is left: last)."""
        ranked = sorted(self.shares, key=lambda cs: (cs[0] is Cost.COMPUTE, -cs[1]))
        return tuple(c for c, share in ranked if share > 0)

    def describe(self) -> str:
        top = sorted(self.shares, key=lambda cs: -cs[1])[:3]
        text = ", ".join(f"{c} {s:.0%}" for c, s in top)
        return f"{text} ({self.source})" if self.source else text


def mechanism_order(par: Parallelism, evidence: Evidence | None) -> tuple[Mechanism, ...]:
    """Mechanisms to try, most promising first: the evidence's costs, then each axis's own."""
    costs: list[Cost] = list(evidence.dominant()) if evidence else []
    for axis in par.ordered_axes():
        costs += [c for c in DOMINANT_COST[axis] if c not in costs]
    order: list[Mechanism] = []
    for cost in costs:
        order += [m for m in COST_MECHANISMS[cost] if m not in order]
    order += [m for m in Mechanism if m not in order]
    order = [m for m in order if applies(m, par)]
    # A cell of two axes: after the dominant axis's first two mechanisms, the secondary
    # axis's own first one (SKILL.md: "after 2-3 waves on the dominant axis, add a few
    # flags from the secondary axis"; seed mode seeds it with them, `secondary_axis`):
    # FSDP=4,TP=2's windowed einsum came fourth, behind the all-gather's three, and its
    # +7.6 % pair across the axes was never found.
    own = secondary_axis(par, order)
    if own is not None and order.index(own) > 2:
        order.remove(own)
        order.insert(2, own)
    return tuple(order)


def secondary_axis(par: Parallelism, order: list[Mechanism]) -> Mechanism | None:
    """The secondary axis's own first mechanism (None: one axis)."""
    axes = par.ordered_axes()
    if len(axes) < 2:
        return None
    own = [m for c in DOMINANT_COST[axes[1]] for m in COST_MECHANISMS[c]
           if m in order and m is not Mechanism.PIPELINE]
    return own[0] if own else None


def applies(mechanism: Mechanism, par: Parallelism) -> bool:
    """Mechanism-irrelevant flags are the only ones skipped (SKILL.md Waves 2-4)."""
    if mechanism in (Mechanism.P2P, Mechanism.PIPELINE):
        return par.degree(Axis.PP) > 1
    if mechanism is Mechanism.MATMUL:
        return par.degree(Axis.TP) > 1
    return True


@dataclass(frozen=True)
class Setting:
    key: str
    value: str
    layer: Layer = Layer.XLA

    @property
    def label(self) -> str:
        return f"{self.key}={self.value}"

    @property
    def text(self) -> str:
        """As it reaches the job: `--xla_k=v` appended to XLA_FLAGS, else `K=v`."""
        return f"--{self.label}" if self.layer is Layer.XLA else self.label


@dataclass(frozen=True)
class Profile:
    name: str
    settings: tuple[Setting, ...]
    mechanisms: frozenset[Mechanism]
    family: str = ""  # profiles of one family differ only in the value, ordered by position
    position: int = 0

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(s.key for s in self.settings)


def stack(parts: tuple[Profile, ...]) -> Profile:
    """Several profiles tried together (their keys must not overlap)."""
    settings = tuple(s for p in parts for s in p.settings)
    if len({s.key for s in settings}) != len(settings):
        raise ValueError(f"profiles {[p.name for p in parts]} set the same flag")
    mechs = frozenset(m for p in parts for m in p.mechanisms)
    return Profile("+".join(p.name for p in parts), settings, mechs, family="+".join(
        p.family or p.name for p in parts))


def bubble(stages: int, microbatches: int, virtual: int = 1) -> float:
    """SKILL.md Wave 5: (S - 1) / (M * V + S - 1)."""
    return (stages - 1) / (microbatches * virtual + stages - 1)
