"""Issue 43, item 0: `proposer: tpe` (not the default): Optuna's TPE proposes a wave's
exploring runs, the seed's waves, confirmation, report block and stop rules on top."""

from __future__ import annotations

import random

import pytest

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay


def _inputs(proposer: str) -> Inputs:
    land = pp8()
    par = Parallelism.parse(land.parallelism)
    return Inputs(par, default_catalog(par), tags=land.tags, deployed=land.deployed_settings(),
                  proposer=proposer)


def test_the_default_proposes_by_the_hand_rules() -> None:
    assert Inputs(Parallelism.parse("PP=8"), ()).proposer == "rules"
    r = replay(_inputs("rules"), pp8(), random.Random(3))
    assert "wave.tpe" not in {p.rule for p in r.planned}


def test_tpe_proposes_the_exploring_runs_and_the_seed_rules_still_decide() -> None:
    land = pp8()
    a = replay(_inputs("tpe"), land, random.Random(3))
    rules = [p.rule for p in a.planned]
    assert "wave.tpe" in rules and "wave.catalog" not in rules
    assert rules[0] == "wave1.baseline"  # Wave 1 as the seed's
    # Each recipe it proposes is one the sweep may run: <= 3 flags, no flag twice.
    for p in a.planned:
        if p.rule == "wave.tpe":
            keys = [s.key for s in p.profile.settings]
            assert len(keys) <= 3 and len(set(keys)) == len(keys)
    # A verdict by the seed's rules, its gain read on runs that did not select it.
    v = a.verdict
    assert v.rule.startswith("stop.")
    if v.recipe is not None:
        assert v.n >= 1 and v.interval is not None
    # Stateless and seeded by the run count: a replay proposes the same.
    b = replay(_inputs("tpe"), land, random.Random(3))
    assert [p.profile.name for p in b.planned] == [p.profile.name for p in a.planned]


def _spec(**extra: object) -> dict[str, object]:
    return {"kind": "xla-tuning", "model": "llama2-70b", "node_count": 8,
            "parallelism": "FSDP=8", **extra}


def test_the_proposer_is_a_spec_option_that_reaches_the_planner() -> None:
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec

    assert XlaTuningSpec.model_validate(_spec()).inputs().proposer == "rules"
    assert XlaTuningSpec.model_validate(_spec(proposer="tpe")).inputs().proposer == "tpe"


def test_a_misspelt_proposer_is_refused_with_the_closest() -> None:
    from sweepd.kinds.parse import SpecError, parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec(_spec(proposer="surogate"))
    assert e.value.errors[0]["loc"] == ["proposer"]
    assert "did you mean surrogate?" in e.value.errors[0]["msg"]


@pytest.mark.parametrize(("proposer", "module"), [("tpe", "optuna"), ("surrogate", "sklearn")])
def test_a_proposer_whose_package_is_missing_is_refused_at_validate(
        proposer: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from sweepd.kinds.parse import SpecError, parse_spec

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(proposer=proposer))
    assert [x["loc"] for x in e.value.errors] == [["proposer"]]
    assert "\n" not in str(e.value)
    parse_spec(_spec(proposer="rules"))   # the default needs neither
