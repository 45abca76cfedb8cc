"""The one renderer of an xla-tuning verdict (`structure.Conclusion`): `reason` is the
verdict's prose (the rule's statement, then each clause where it stands), `summary` the
line every reader shows (the headline a person acts on, then "Why:" and the reason with
the planner's terms explained: `report`, `explain`, the Telegram end message), and the
tuning report's verdict is `reason` read back from the stored structure."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.verdict.plain_words import explained, headline
from sweepd.kinds.xla_tuning.verdict.structure import (
    CaveatKind,
    Conclusion,
    Gain,
    GainSource,
    Outcome,
    Slot,
)
from sweepd.kinds.xla_tuning.waves.planned import VerdictKind

# A caveat's clause follows the one before it after "; ", but the bounded rule's note,
# which reads as the statement's own bracket.
_JOIN = {CaveatKind.FAMILY_GAPS: " "}


def summary(c: Conclusion) -> str:
    """The headline (one figure, its interval, the recipe's flags), then why."""
    r, g = c.recipe, c.gain
    said = headline(str(c.kind), r.name if r else None, g.value if g else None,
                    g.interval if g else None, g.n if g else 0, r.flags if r else "",
                    r.flags_var if r else "XLA_FLAGS")
    return said + f". Why: {explained(reason(c))}"


def reason(c: Conclusion) -> str:
    out = c.statement + _slot(c, Slot.STOP)
    if c.recipe is None and c.kind is not VerdictKind.BOUNDED:
        out += (f"; no change: nothing significantly above +{c.bar:.0%} on runs that did "
                f"not select it, bounded so far ({c.profiles} profiles)")
    out += _slot(c, Slot.OPEN)
    if c.recipe is not None and c.gain is not None:
        out += gain_clause(c.recipe.name, c.gain, _text(c, Slot.IN_GAIN))
        if c.kind is not VerdictKind.PROPOSAL:
            out += (f": confirmed >= +{c.win_bar:.0%}" if c.outcome is Outcome.DEPLOY
                    else f": significantly above +{c.bar:.0%}, not confirmed >= "
                         f"+{c.win_bar:.0%}; proposed as such")
    if c.recipe is not None and c.recipe.left_out:
        out += "; left out: " + "; ".join(c.recipe.left_out)
    if c.recipe is not None and c.recipe.tested:
        out += "; tested: " + "; ".join(c.recipe.tested)
    out += _slot(c, Slot.ONE_RUN)
    needs = c.needs()
    if needs:
        out += "; conditional: " + "; ".join(n.text for n in needs)
    return out + _slot(c, Slot.AFTER)


def gain_clause(recipe: str, g: Gain, overstate: str = "") -> str:
    """The gain, its interval and the runs it is read on (`overstate`: how far figures read
    on the runs that selected a recipe run above the truth)."""
    said = (f"; {recipe} {g.value:+.2%} (95 % interval {g.interval[0]:+.2%} to "
            f"{g.interval[1]:+.2%}, ")
    if g.source is GainSource.REPORT_BLOCK:
        return said + (f"from {g.n} runs of it and {g.baseline_n} of the baseline made after "
                       f"it was decided, which decided nothing; the runs that decided it "
                       f"read {g.decided or 0.0:+.2%})")
    said += f"{g.n} run{'s' if g.n != 1 else ''} after the one that selected it"
    if g.drift is not None:
        said += f", against the baseline's {g.drift} over the sweep (drift: {g.drift})"
    if g.source is GainSource.FRESH:
        return said + ")"
    if g.source is GainSource.FRESH_DECIDED_STOP:
        return said + ", which also decided the stop: not re-measured after it)"
    return said + (", which also put it forward: the 8 h stop came before the runs that "
                   f"would measure it apart; {overstate})")


def _text(c: Conclusion, slot: Slot) -> str:
    return "; ".join(x.text for x in c.caveats if x.kind.slot is slot)


def _slot(c: Conclusion, slot: Slot) -> str:
    return "".join(_JOIN.get(x.kind, "; ") + x.text for x in c.caveats if x.kind.slot is slot)
