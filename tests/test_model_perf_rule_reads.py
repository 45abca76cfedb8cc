"""Model perf's rules against its code (issue 49): each search move is its own rule, decided
in the function its `where` names, and every number a rule decides with is in its list, as
an AST scan of the kind reads it (tests/rule_reads.py, as for xla-tuning)."""

from __future__ import annotations

from pathlib import Path

import sweepd.kinds.model_perf as kind_package
from sweepd.kinds.model_perf import rules
from sweepd.kinds.model_perf.rules import (
    BELOW_FAILURE,
    BELOW_LOWEST,
    CATEGORICAL,
    LADDER,
    LINE_TEST,
    MIDPOINT,
    PRIOR_BEST,
    SECANT,
    TILE_MULTIPLE,
)
from sweepd.kinds.model_perf.thresholds import PerfThresholds
from sweepd.reports.report import explain_lines
from tests.rule_reads import Reads, rule_reads
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario


def _reads() -> Reads:
    return rule_reads(kind_package, rules.BOOK, PerfThresholds,
                      {r.id: r.where for r in rules.BOOK.rules if r.where})


def _full(where: tuple[str, ...]) -> set[str]:
    return {f"{kind_package.__name__}.{w}" for w in where}


def test_every_number_a_model_perf_rules_decision_reads_is_in_its_list() -> None:
    got = _reads()
    unlisted = {r.id: sorted(got.reads.get(r.id, set()) - set(r.thresholds))
                for r in rules.BOOK.rules}
    assert {k: v for k, v in unlisted.items() if v} == {}
    assert {r.id for r in rules.BOOK.rules} - set(got.sites) == set()
    # No constant holding a number that the book lacks is read where a rule decides.
    assert got.unknown == {}


def test_each_search_move_is_decided_where_its_rule_says_reading_its_own_numbers() -> None:
    plain = rule_reads(kind_package, rules.BOOK, PerfThresholds)
    for move in rules.SEARCH_MOVES:
        assert move.where and plain.sites[move.id] == _full(move.where), move.id
    # Each named here is held to its function by the loop above (no sweep here reaches them
    # all): the moves after a failure, the line's test, the gaps' moves and the shapes'.
    for move in (BELOW_FAILURE, BELOW_LOWEST, CATEGORICAL, LADDER, LINE_TEST, MIDPOINT,
                 PRIOR_BEST, SECANT, TILE_MULTIPLE):
        assert plain.sites[move.id] == _full(move.where)
    got = _reads()
    # The climb reads its factor alone; the secant step its step sizes; the first probe
    # its start fraction: once one rule read all 22 (`model_perf.upper_bound_probe`).
    assert got.reads[rules.CLIMB.id] == {"climb"}
    assert {"step_noise", "step_share"} <= got.reads[rules.SECANT.id]
    assert "climb" not in got.reads[rules.SECANT.id]
    assert got.reads[rules.FIRST_PROBE.id] == {"start_fraction", "align_slack"}
    assert got.reads[rules.LARGEST_FIT.id] == {"descent_aim"}


def test_the_budget_stop_and_the_two_param_step_decide_outside_the_planner() -> None:
    # Each decides in small functions of its own that the planner calls: the scan, which
    # follows every call from where a rule decides, once read the whole planner for them.
    plain = rule_reads(kind_package, rules.BOOK, PerfThresholds)
    assert plain.sites[rules.BUDGET_GAP.id] == _full(rules.BUDGET_GAP.where)
    got = _reads()
    # The two-parameter step is recorded by the planner (`plan_two.plan` names the rule);
    # it is chosen in `next_pair`, where the book says.
    assert got.sites[rules.TWO_PARAM_PROBE.id] == _full(("two_param.grid:next_pair",))
    assert {"extra_runs", "noise"} <= got.reads[rules.BUDGET_GAP.id]
    assert {"starves_above", "past_ref", "flat"} <= got.reads[rules.TWO_PARAM_PROBE.id]
    # The batch search's own moves are not followed into: their numbers are theirs.
    assert "climb" not in got.reads[rules.TWO_PARAM_PROBE.id]


async def test_explain_of_a_model_perf_sweep_names_a_rule_per_move(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    await run(config, perf_spec())
    store = await open_store(config)
    try:
        events = await store.events.of_sweep(1)
        lines = explain_lines(events, {r.id: r.seq for r in await store.runs.of_sweep(1)})
        moves = [e.rule for e in events if e.rule in {m.id for m in rules.SEARCH_MOVES}]
    finally:
        await store.close()
    # The first probe, then the largest predicted fit, then steps the trend chose: each
    # under its own rule, and `explain` shows which.
    assert moves[:2] == [rules.FIRST_PROBE.id, rules.LARGEST_FIT.id]
    assert len(set(moves)) >= 3, moves
    text = "\n".join(lines)
    assert all(f"[{m}]" in text for m in set(moves))
    assert "upper_bound_probe" not in text
