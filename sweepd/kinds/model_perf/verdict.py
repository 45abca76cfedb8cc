"""A model perf verdict as a structure: the rule that decided, the value (and the second
knob's, in a two-parameter sweep), its TGS and, where the value ran more than once, the
range its runs spanned, and typed caveats. The planner builds it; `summary` renders it to
the one line every reader shows (the sweep's reason: `report`, `explain`, Telegram, the
run's output), and `as_dict` stores it in the sweep's verdict beside that text, so a
consumer of `report --json` reads the caveats by kind rather than parsing the prose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CaveatKind(StrEnum):
    """What a caveat says about the verdict; one kind per source of doubt."""

    BUDGET = "budget"              # max_runs ran out before the search settled
    UNREPEATED = "unrepeated"      # the budget ran out before a run to measure the noise
    SLOWED = "slowed"              # the runs read lower later: not one curve (`comparable`)
    GAP = "gap"                    # a gap beside the best left open at the budget
    EDGE = "edge"                  # the best is at the edge of the values given
    UNGIVEN = "ungiven"            # a value beside the best that the spec did not give
    FLAT_TOP = "flat_top"          # rivals within the noise of the best
    BENT = "bent"                  # the curve beside the best is not concave
    SECOND_PEAK = "second_peak"    # room for a second peak the search did not rule out
    NOT_RUN = "not_run"            # given values not run, each with what ruled it out
    STANDING = "standing"          # failures contradicting a pass that stand
    EARLIER_SWEEP = "earlier_sweep"  # values judged by an earlier sweep's runs
    PRIOR_DROPPED = "prior_dropped"  # the earlier sweep's curve does not hold here
    NOISE = "noise"                # more noise than the rules assume
    QUIET = "quiet"                # far less noise than the floor the rules assume
    SETTING = "setting"            # a two-parameter sweep: why a setting's search ended


@dataclass(frozen=True)
class Caveat:
    """One caveat: its kind, its prose (as the verdict line says it) and the data it
    names (e.g. a setting, the budget and the value that was next)."""

    kind: CaveatKind
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "text": self.text, **self.data}


def caveat(kind: CaveatKind, text: str | None, **data: Any) -> Caveat | None:
    """A caveat where a rule said something (`text`), else None."""
    return Caveat(kind, text, data) if text else None


def caveats(*found: Caveat | None) -> tuple[Caveat, ...]:
    return tuple(c for c in found if c is not None)


@dataclass(frozen=True)
class Verdict:
    rule: str
    model: str
    parameter: str
    value: Any                     # None: no value ran successfully
    tgs: float | None
    runs: int
    settled: bool = True
    caveats: tuple[Caveat, ...] = ()
    # The best value's runs' lowest and highest TGS, where it ran more than once.
    tgs_range: tuple[float, float] | None = None
    nodes: int | None = None       # the nodes it ran on, where fewer than were pinned
    pinned: int | None = None
    second: str | None = None      # a two-parameter sweep: the second knob's name
    second_value: Any = None

    def caveat_text(self) -> str | None:
        """The caveats as the verdict line joins them (None: none)."""
        return "; ".join(c.text for c in self.caveats) or None

    def kinds(self) -> tuple[CaveatKind, ...]:
        return tuple(c.kind for c in self.caveats)

    def as_dict(self) -> dict[str, Any]:
        """What the sweep's verdict stores beside its text."""
        return {"rule": self.rule, "tgs_range": list(self.tgs_range) if self.tgs_range
                else None, "caveats": [c.as_dict() for c in self.caveats]}


def summary(v: Verdict) -> str:
    """The verdict's one line: the sweep's reason, its progress line and its Telegram
    message all show this text."""
    pair = f" with {v.second}={v.second_value}" if v.second is not None else ""
    if v.value is None or v.tgs is None:
        what = f"({v.parameter}, {v.second}) combination" if v.second is not None \
            else f"{v.parameter} value"
        count = f"{v.runs} runs" if v.second is not None else _runs(v.runs)
        return f"{v.model}: no {what} ran successfully ({count})"
    on = f" on {v.nodes} of the {v.pinned} pinned nodes" \
        if v.nodes is not None and v.pinned is not None and v.nodes < v.pinned else ""
    what = "optimum" if v.settled else "best so far"
    count = f"{v.runs} runs" if v.second is not None else _runs(v.runs)
    text = v.caveat_text()
    return (f"{v.model}: {what} {v.parameter}={v.value}{pair} at {v.tgs:,.0f} "
            f"TGS/device{on} ({count})" + (f"; {text}" if text else ""))


def tgs_range(tgs: Sequence[float]) -> tuple[float, float] | None:
    """The range a value's runs spanned, where it ran more than once."""
    return (min(tgs), max(tgs)) if len(tgs) > 1 else None


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"
