"""An xla-tuning verdict as a structure: the rule that decided and its own statement, the
outcome (deploy a recipe, proposed below the win bar, no change, bounded), the recipe, its
gain with the interval, the runs behind it and whether those runs selected it, and typed
caveats, each with the clause the prose says and the data it names. `make_verdict` builds
it once where the verdict is decided; `render.py` turns it into the prose every reader
shows (`report`, `explain`, Telegram, `<MODEL_TAG>-tuning.md`); `as_dict` stores it in the
sweep's verdict beside that prose, and `from_stored` reads it back (None for a verdict
stored before it was kept), so a consumer reads the caveats by kind, not by parsing text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from sweepd.kinds.xla_tuning.waves.planned import Verdict, VerdictKind


class Outcome(StrEnum):
    """What the verdict tells a person to do."""

    DEPLOY = "deploy"          # a recipe confirmed >= the win bar (see `conditional`)
    BELOW_WIN = "below_win"    # significantly above the bounded bar, not confirmed >= win
    NO_CHANGE = "no_change"    # nothing significantly above the bounded bar, so far
    BOUNDED = "bounded"        # structurally bounded at the editable scope: no change


class GainSource(StrEnum):
    """The runs the verdict's gain is read on."""

    REPORT_BLOCK = "report_block"    # made after it was decided, which decided nothing
    FRESH = "fresh"                  # after the one that selected it (report_runs 0)
    FRESH_DECIDED_STOP = "fresh_decided_stop"  # ... which also decided the stop
    FRESH_PUT_FORWARD = "fresh_put_forward"    # ... which also put it forward (8 h stop)


class Slot(Enum):
    """Where a caveat's clause stands in the prose (`render.reason`)."""

    STOP = 1       # right after the rule's statement
    OPEN = 2       # what a "no change" verdict leaves open
    IN_GAIN = 3    # inside the gain's brackets
    ONE_RUN = 4    # after the recipe's parts
    NEED = 5       # "conditional: ...": what a deployment would still need
    AFTER = 6      # what the sweep never measured, and the block's reading of a win


class CaveatKind(StrEnum):
    """One kind per source of doubt; `slot` is where the prose says it."""

    CUT_AT_STOP = "cut_at_stop"            # bounded read at the 8 h stop, before runs due
    FAMILY_GAPS = "family_gaps"            # which bounded rule applied (family_gaps on or off)
    OPEN_QUESTION = "open_question"        # a recipe above the bar, not significantly
    UNRUN_STACK = "unrun_stack"            # a stack predicted above the bar, not run
    STACK_ABOVE = "stack_above"            # a stack above the bar on its selecting runs
    OUT_OF_REACH = "out_of_reach"          # the bounded rule's count vs the job length
    SELECTING_OVERSTATE = "selecting_overstate"  # the gain read on the runs that selected it
    ONE_RUN_LEAD = "one_run_lead"          # a profile above the gain on its one run
    NOT_HELD = "not_held"                  # the block put it below the bounded bar
    FEW_FRESH = "few_fresh"                # confirmed on fewer fresh runs than needed
    UNTESTED_PARTS = "untested_parts"      # parts never tested without the rest
    WAVE6_NOT_RUN = "wave6_not_run"        # Wave 6 not run on other tags
    WAVE6_NOT_FINISHED = "wave6_not_finished"
    WAVE6_UNRESOLVED = "wave6_unresolved"  # a regression on another tag not ruled out
    REGRESSES = "regresses"                # regresses other config tags: config-conditional
    NONE_TRIED = "none_tried"              # no catalog profile ran: Wave 1 alone
    UNTRIED = "untried"                    # what of the catalog a no-change verdict never ran
    IN_EFFECT = "in_effect"                # profiles left out: already in effect
    NO_COLLECTIVES = "no_collectives"      # profiles left out: the program has no collectives
    ENV_FIXED = "env_fixed"                # env-file settings with no default to put back
    RESTORE_DROPPED = "restore_dropped"    # restore_default dropped unmeasured on a tag
    WIN_NOT_BACKED = "win_not_backed"      # the block read a win below the line
    WIN_NEAR_LINE = "win_near_line"        # the block read a win within noise of the line
    QUIET = "quiet"                        # the runs measured far less noise than assumed

    @property
    def slot(self) -> Slot:
        return _SLOTS[self]


_K = CaveatKind
_SLOTS = {
    _K.CUT_AT_STOP: Slot.STOP, _K.FAMILY_GAPS: Slot.STOP,
    _K.OPEN_QUESTION: Slot.OPEN, _K.UNRUN_STACK: Slot.OPEN, _K.STACK_ABOVE: Slot.OPEN,
    _K.OUT_OF_REACH: Slot.OPEN, _K.SELECTING_OVERSTATE: Slot.IN_GAIN,
    _K.ONE_RUN_LEAD: Slot.ONE_RUN,
    **{k: Slot.NEED for k in (_K.NOT_HELD, _K.FEW_FRESH, _K.UNTESTED_PARTS, _K.WAVE6_NOT_RUN,
                              _K.WAVE6_NOT_FINISHED, _K.WAVE6_UNRESOLVED, _K.REGRESSES)},
    **{k: Slot.AFTER for k in (_K.NONE_TRIED, _K.UNTRIED, _K.IN_EFFECT, _K.NO_COLLECTIVES,
                               _K.ENV_FIXED,
                               _K.RESTORE_DROPPED, _K.WIN_NOT_BACKED, _K.WIN_NEAR_LINE,
                               _K.QUIET)},
}


@dataclass(frozen=True)
class Caveat:
    """One caveat: its kind, its clause as the prose says it (without the separator before
    it) and the data it names (JSON values: a tag, a profile, a figure)."""

    kind: CaveatKind
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "text": self.text, **self.data}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Caveat:
        return Caveat(CaveatKind(d["kind"]), str(d["text"]),
                      {k: x for k, x in d.items() if k not in ("kind", "text")})


def caveat(kind: CaveatKind, text: str, **data: Any) -> Caveat | None:
    """A caveat where a rule said something (`text`), else None."""
    return Caveat(kind, text, data) if text else None


@dataclass(frozen=True)
class Gain:
    """The recipe's gain vs baseline-deployed, its 95 % interval and the runs behind it."""

    value: float
    interval: tuple[float, float]
    n: int
    source: GainSource
    baseline_n: int = 0           # REPORT_BLOCK: the baseline's runs in the block
    decided: float | None = None  # REPORT_BLOCK: what the runs that decided it read
    drift: str | None = None      # fresh runs: the baseline's reading, where not its mean
    held: bool = True             # still significantly above the bounded bar there

    @property
    def selected(self) -> bool:
        """Whether the runs that give it also selected the recipe (kept it in front)."""
        return self.source is not GainSource.REPORT_BLOCK


@dataclass(frozen=True)
class Recipe:
    name: str
    left_out: tuple[str, ...] = ()  # parts dropped from the stack, each with why
    tested: tuple[str, ...] = ()    # parts kept after their stack ran without them
    flags: str = ""                 # its settings as its runs were sent them (the end's)
    flags_var: str = "XLA_FLAGS"    # the variable the flags go in


@dataclass(frozen=True)
class Conclusion:
    rule: str
    kind: VerdictKind
    outcome: Outcome
    statement: str                  # the rule's own words (what fired, on what count)
    recipe: Recipe | None
    gain: Gain | None
    profiles: int                   # distinct profiles tried in Waves 2-4
    bar: float                      # the bounded bar (+2 %)
    win_bar: float                  # the win bar (+5 %)
    win: bool = False               # claimed >= the win bar
    caveats: tuple[Caveat, ...] = ()

    @property
    def conditional(self) -> bool:
        return bool(self.needs())

    def needs(self) -> tuple[Caveat, ...]:
        """What a deployment of the recipe would still need."""
        return tuple(c for c in self.caveats if c.kind.slot is Slot.NEED)

    def kinds(self) -> tuple[CaveatKind, ...]:
        return tuple(c.kind for c in self.caveats)

    def as_dict(self) -> dict[str, Any]:
        """What the sweep's verdict stores beside its prose (its other keys, kind, rule,
        recipe, gain, interval, gain_runs, left_out, profiles and win, are the
        planner's and stored as before)."""
        g = self.gain
        r = self.recipe
        return {"outcome": str(self.outcome), "statement": self.statement,
                "gain_source": str(g.source) if g else None,
                "gain_selected": g.selected if g else None,
                "gain_detail": {"baseline_n": g.baseline_n, "decided": g.decided,
                                "drift": g.drift, "held": g.held} if g else None,
                "flags": r.flags if r else None, "flags_var": r.flags_var if r else None,
                "tested": list(r.tested) if r else [],
                "bars": {"bounded": self.bar, "win": self.win_bar},
                "caveats": [c.as_dict() for c in self.caveats]}


def from_stored(v: Mapping[str, Any]) -> Conclusion | None:
    """The structure a sweep's stored verdict holds; None for one stored before it was
    kept (its prose, `reason`, is then read as it is)."""
    if "outcome" not in v or "statement" not in v:
        return None
    detail = v.get("gain_detail") or {}
    gain = None
    if v.get("gain_source") is not None:
        lo, hi = v["interval"]
        gain = Gain(float(v["gain"]), (float(lo), float(hi)), int(v["gain_runs"]),
                    GainSource(v["gain_source"]), int(detail.get("baseline_n") or 0),
                    detail.get("decided"), detail.get("drift"), bool(detail.get("held", True)))
    tested = tuple(v.get("tested") or ())
    left = tuple(v.get("left_out") or ())
    recipe = (Recipe(str(v["recipe"]), left, tested, str(v.get("flags") or ""),
                     str(v.get("flags_var") or "XLA_FLAGS"))
              if isinstance(v.get("recipe"), str) else None)
    bars = v.get("bars") or {}
    return Conclusion(str(v["rule"]), VerdictKind(v["kind"]), Outcome(v["outcome"]),
                      str(v["statement"]), recipe, gain, int(v.get("profiles") or 0),
                      float(bars["bounded"]), float(bars["win"]), bool(v.get("win")),
                      tuple(Caveat.from_dict(c) for c in v.get("caveats") or ()))


@dataclass(frozen=True)
class Decided(Verdict):
    """The planner's verdict with its structure (`said`), built once in `make_verdict`:
    its `reason` is `render.reason(said)`."""

    said: Conclusion = field(kw_only=True)
