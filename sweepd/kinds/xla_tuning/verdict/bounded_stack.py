"""Before a "structurally bounded" verdict: the stack the singles read so far add up to.
The bounded rule says no recipe of the scope gives more than +2 %, and a stack of its
singles is such a recipe. `SearchSteps.stacks` stacks only singles clear of noise in their
own run, so three +1.5 % singles at 0.8 % noise (each read +0.9..+1.5 % once, under its
standard error) were never stacked, and the red team's cell was called bounded in 12 of 40
sweeps at 880 s (10 at 600 s) though any pair of them gives +3.0 %. Here a single need only
read above POSITIVE: the stack the planner itself predicts highest (`predicted_stacks`,
the gains compounded), if it clears the bounded bar and has not run, runs once before the
verdict (at most STACKS_PER_WAVE such stacks a leader; a stack reading above the bar is
then re-run and asked as any recipe, `bounded_question.py`). A bounded verdict also never
stands while a measured stack reads significantly above the bar over all its runs: a
stack is chosen by its parts' readings, not its own, so its first run is no winner's
curse. At the 8 h stop an unrun stack predicted over the bar, or a stack reading
significantly above it, leaves the verdict "no change" (the timebox), not "bounded"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweepd.kinds.xla_tuning import rules as rule_book
from sweepd.kinds.xla_tuning.evidence.board import Z_ONE
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.verdict.bounded_question import BASE_FLOOR

if TYPE_CHECKING:
    from sweepd.kinds.xla_tuning.waves.candidates import Candidates
    from sweepd.kinds.xla_tuning.waves.candidates_base import Item

RULE = rule_book.BOUNDED_STACK.id


def unrun_stack(inp: Inputs, cands: Candidates) -> tuple[Item, float] | None:
    """The unrun stack predicted highest, if it clears the bounded bar."""
    top = max(cands.steps.predicted_stacks(clear_of_noise=False), key=lambda sp: sp[1],
              default=None)
    return top if top is not None and top[1] > inp.bounded_gain else None


def stack_before_bounded(inp: Inputs, cands: Candidates) -> list[Item]:
    """The run a bounded verdict waits for first: the stack `unrun_stack` names, once; not
    before the baseline has BASE_FLOOR runs (`before_bounded_question` runs them first): a
    prediction read against one baseline run mostly picked a pair whose parts had read
    high by that run alone."""
    base = cands.board.base(inp.tags[0])
    if inp.bounded_question and (base.n if base is not None else 0) < BASE_FLOOR:
        return []
    top = unrun_stack(inp, cands)
    if top is None:
        return []
    (prof, tag, _, why), _pred = top
    return [(prof, tag, RULE, f"{why}, above the +{inp.bounded_gain:.0%} bar: run before "
             "the cell is called bounded")]


def stack_above(inp: Inputs, cands: Candidates) -> str | None:
    """A measured stack reading significantly above the bounded bar over all its runs."""
    t, board = inp.tags[0], cands.board
    for e in board.measured(t):
        d = board.search_delta(e.profile, t)
        if ("+" in e.profile and d is not None
                and d - Z_ONE * board.search_se(e.profile, t) > inp.bounded_gain):
            return e.profile
    return None


def bounded_blocked(inp: Inputs, cands: Candidates) -> bool:
    """At the 8 h stop: a stack not run or reading above the bar leaves the scope unbounded."""
    return unrun_stack(inp, cands) is not None or stack_above(inp, cands) is not None


def stack_note(inp: Inputs, cands: Candidates) -> str:
    """What a "no change" verdict leaves open on stacks (`bounded_blocked`): the stack the
    singles predict over the bar that did not run, or one reading above it."""
    top = unrun_stack(inp, cands)
    if top is not None:
        return (f"; not shown either way: {top[0][0].name}, {top[1]:+.2%} if its parts add "
                f"up (above +{inp.bounded_gain:.0%}), did not run before the stop")
    name = stack_above(inp, cands)
    if name is None:
        return ""
    t, board = inp.tags[0], cands.board
    e = board.get(name, t)
    return (f"; not shown either way: {name} reads {board.search_delta(name, t) or 0.0:+.2%} "
            f"over its {e.n if e is not None else 0} run(s), significantly above "
            f"+{inp.bounded_gain:.0%} there but not yet on runs that did not select it")
