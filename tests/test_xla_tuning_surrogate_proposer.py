"""Issue 43, item 0: `proposer: surrogate` (not the default): a Bayesian linear model of the
board proposes a wave's exploring runs, best upper bound first; the seed's confirmation,
report block and stop rules stay on top."""

from __future__ import annotations

import random

from sweepd.kinds.xla_tuning.catalog.catalog import Layer, Mechanism, Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.catalog.defaults import pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.evidence.board_build import build
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, Outcome, Result
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import plan
from sweepd.kinds.xla_tuning.waves.candidates import Candidates
from sweepd.kinds.xla_tuning.waves.next_wave import wave_candidates
from sweepd.kinds.xla_tuning.waves.planned import profiles
from sweepd.kinds.xla_tuning.waves.surrogate_proposals import ranked_recipes, surrogate_items


def _flag(name: str, mech: Mechanism) -> Profile:
    return Profile(name, (Setting(f"xla_gpu_test_{name}", "true", Layer.XLA),),
                   frozenset({mech}), family=name)


CATALOG = tuple(_flag(n, m) for n, m in (
    ("a", Mechanism.MATMUL), ("b", Mechanism.OVERLAP), ("c", Mechanism.COMBINE),
    ("d", Mechanism.SCHEDULER), ("e", Mechanism.MEMORY)))


def _board(inp: Inputs, tgs: dict[str, float]) -> Candidates:
    results = [Result(BASELINE, "default", Outcome.OK, 1000.0, wave=1, rule="wave1.baseline")
               for _ in range(3)]
    results += [Result(name, "default", Outcome.OK, v, wave=2, rule="wave.surrogate")
                for name, v in tgs.items()]
    board = build(results, inp.noise, inp.max_flakes, inp.drift)
    return Candidates(inp, board, None, profiles(inp))


def test_the_wave_opens_with_the_recipe_its_model_ranks_first() -> None:
    inp = Inputs(Parallelism.parse("FSDP=8"), CATALOG, proposer="surrogate")
    # a +6 %, b +3 %, c -3 %: the stack a+b is predicted best, with d or e (untried,
    # the prior's width) on top for the upper bound; c is in no stack ranked above a+b.
    c = _board(inp, {"a": 1060.0, "b": 1030.0, "c": 970.0})
    ranked = ranked_recipes(c)
    top, mean, _ = ranked[0]
    assert {"a", "b"} <= set(top) and "c" not in top
    assert mean > 0.085  # a and b compound (+6 % and +3 %), the untried part adds nothing
    items = surrogate_items(c, 3)
    assert items[0][0].name == "+".join(top) and items[0][2] == "wave.surrogate"
    # The next picks read the first as measured at its prediction: not the same recipe
    # again with one part swapped for an equally unknown one in the same place.
    assert len({it[0].name for it in items}) == 3
    # What plan() hands out after Wave 1 with this option is that wave, after the seed's
    # confirmations (a +6 % single run once is re-run first).
    wave = wave_candidates(c)
    assert wave[0][2].startswith("noise.") and items[0] in wave
    assert next(it for it in wave if it[2] == "wave.surrogate") == items[0]


def test_the_default_does_not_ask_the_model() -> None:
    inp = Inputs(Parallelism.parse("FSDP=8"), CATALOG)
    assert inp.proposer == "rules"
    c = _board(inp, {"a": 1060.0, "b": 1030.0, "c": 970.0})
    assert "wave.surrogate" not in {it[2] for it in wave_candidates(c)}


def test_a_whole_sweep_with_the_option_keeps_the_seed_rules_on_top() -> None:
    land = pp8()
    par = Parallelism.parse(land.parallelism)
    inp = Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                 proposer="surrogate")
    a = replay(inp, land, random.Random(3))
    rules = [p.rule for p in a.planned]
    assert rules[0] == "wave1.baseline" and "wave.surrogate" in rules
    assert "wave.catalog" not in rules and "wave.stack" not in rules
    for p in a.planned:
        if p.rule == "wave.surrogate":
            keys = [s.key for s in p.profile.settings]
            assert len(keys) <= 3 and len(set(keys)) == len(keys)
    assert a.verdict.rule.startswith("stop.")
    b = replay(inp, land, random.Random(3))  # stateless: a replay proposes the same
    assert [p.profile.name for p in b.planned] == [p.profile.name for p in a.planned]
    assert plan(inp, [], None)  # Wave 1 first, as the seed's


def test_a_stack_that_did_not_run_leaves_its_parts_to_run_alone() -> None:
    # a+b+c ran out of memory: one of the three is the cause, the other two are not known
    # to be; none is dropped, and none is packed into another stack before it runs alone.
    inp = Inputs(Parallelism.parse("FSDP=8"), CATALOG, proposer="surrogate")
    results = [Result(BASELINE, "default", Outcome.OK, 1000.0, wave=1, rule="wave1.baseline")
               for _ in range(3)]
    results.append(Result("a+b+c", "default", Outcome.OOM, wave=2, rule="wave.surrogate"))
    board = build(results, inp.noise, inp.max_flakes, inp.drift)
    c = Candidates(inp, board, None, profiles(inp))
    ranked = [names for names, _, _ in ranked_recipes(c)]
    for part in "abc":
        assert (part,) in ranked
        assert not any(part in names and len(names) > 1 for names in ranked)
    assert ranked[0] == ("d", "e")  # the untried pair packs together
