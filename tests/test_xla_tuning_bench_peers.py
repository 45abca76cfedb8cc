"""The bench's equal-run peers of the singles oracle (bench/xla_tuning_methods.py): the
oracle cut to a run budget spends no more than it, and its honest form claims what it
measured rather than what it was told."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import pp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog

BENCH = Path(__file__).resolve().parent.parent / "bench"


def methods() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("xla_tuning_methods",
                                                  BENCH / "xla_tuning_methods.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_oracle_at_equal_runs_spends_no_more_than_the_budget() -> None:
    m = methods()
    land = pp8()
    cat = default_catalog(Parallelism.parse(land.parallelism))
    full = m.singles_oracle(land, cat, random.Random(1))
    cut = m.singles_oracle(land, cat, random.Random(1), budget=20)
    assert full.runs > 20 >= cut.runs
    # Still told the truth: its claimed gain is the recipe's true gain.
    assert cut.settings and cut.gain == land.gain(cut.settings, land.tags[0]) - 1


def test_the_honest_singles_claim_a_measurement_within_the_budget() -> None:
    m = methods()
    land = pp8()
    cat = default_catalog(Parallelism.parse(land.parallelism))
    claim = m.singles_measured(land, cat, random.Random(1), budget=30)
    assert claim.runs <= 30 and claim.settings
    true = land.gain(claim.settings, land.tags[0])
    assert true is not None and claim.gain != true - 1  # a noisy measurement, not the truth


def test_tpe_and_random_search_run_at_the_budget_they_are_given() -> None:
    # Issue 21's peers: Optuna's TPE sampler and random search at the planner's run count,
    # each claiming its best single measurement (a noisy one, not the recipe's truth).
    m = methods()
    land = pp8()
    cat = default_catalog(Parallelism.parse(land.parallelism))
    for search in (m.tpe, m.random_search):
        claim = search(land, cat, random.Random(1), 30)
        assert claim.runs == 30 and claim.settings
        true = land.gain(claim.settings, land.tags[0])
        assert true is not None and claim.gain != true - 1


def test_the_confirmed_singles_claim_the_runs_made_after_the_choice() -> None:
    # singles+conf: the same budget as singles+stk, its claim read on two re-runs of the
    # chosen recipe beside two new baseline runs, so it differs from the selecting run.
    m = methods()
    land = pp8()
    cat = default_catalog(Parallelism.parse(land.parallelism))
    picked = m.singles_measured(land, cat, random.Random(1), budget=30)
    confirmed = m.singles_confirmed(land, cat, random.Random(1), budget=30)
    assert confirmed.runs <= 30 and confirmed.settings
    assert confirmed.gain != picked.gain
