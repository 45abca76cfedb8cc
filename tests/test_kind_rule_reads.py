"""Node perf's, network's, model sweep's and the campaign's rules against their code (issue
49), as xla-tuning's and model perf's are: every rule is found deciding somewhere (the
functions naming it, or its `where`), every number its decision reads (a module constant
the book lists, read off the code by tests/rule_reads.py) is in its list, and no module
constant holding a number that the book lists nowhere is read on the way."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from sweepd.kinds.network import isolation
from sweepd.kinds.node_perf import plan as node_plan
from sweepd.util.rulebook import RuleBook
from tests.rule_reads import Reads, rule_reads

KINDS = ("node_perf", "network", "model_sweep", "campaign")


def _kind(name: str) -> tuple[ModuleType, RuleBook]:
    package = importlib.import_module(f"sweepd.kinds.{name}")
    book = importlib.import_module(f"sweepd.kinds.{name}.rules").BOOK
    assert isinstance(book, RuleBook)
    return package, book


def _reads(name: str) -> Reads:
    package, book = _kind(name)
    return rule_reads(package, book, None, {r.id: r.where for r in book.rules if r.where})


@pytest.mark.parametrize("name", KINDS)
def test_every_number_a_rules_decision_reads_is_in_its_list(name: str) -> None:
    _, book = _kind(name)
    got = _reads(name)
    # A scan finding no decision would pass anything.
    assert {r.id for r in book.rules} - set(got.sites) == set()
    unlisted = {r.id: sorted(got.reads.get(r.id, set()) - set(r.thresholds))
                for r in book.rules}
    assert {k: v for k, v in unlisted.items() if v} == {}
    assert got.unknown == {}


def _site(func: Callable[..., object]) -> str:
    """A function as the scan names the place a rule decides: `module:qualname`."""
    return f"{func.__module__}:{func.__qualname__}"


def test_the_scan_reads_what_each_kinds_rules_decide_with() -> None:
    # What each kind's rules read, so that a scan gone blind fails here and not silently.
    node = _reads("node_perf")
    assert node.sites["node_perf.confirm"] == {_site(node_plan.confirm_runs)}
    assert node.reads["node_perf.confirm"] == {"healthy_band", "degraded_band"}
    network = _reads("network")
    assert network.reads["network.cross"] == {"max_block_splits"}
    assert network.sites["network.confirm"] == {_site(isolation._Wave.confirm)}
    sweep = _reads("model_sweep")
    assert sweep.reads["model_sweep.all_fail"] == {"all_fail_jobs", "all_fail_models"}


def test_a_number_beside_a_rule_that_the_book_lacks_is_unknown(tmp_path_factory:
                                                               pytest.TempPathFactory) -> None:
    # A constant the book does not list, read where a rule decides: the scan names it.
    root = tmp_path_factory.mktemp("kind")
    pkg = root / "probe_kind"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text(
        "from sweepd.util.rulebook import Rule, RuleBook, Threshold\n"
        "GO = Rule('probe.go', 'go', ('listed',))\n"
        "BOOK = RuleBook('probe', (GO,), (Threshold('listed', 'probe_kind.plan:LISTED', 'x'),))\n")
    (pkg / "plan.py").write_text(
        "from probe_kind.rules import GO\n"
        "LISTED = 2\nUNLISTED = 0.5\nLABEL = 'x'\n"
        "def _far(x):\n    return x > UNLISTED\n"
        "def plan(x):\n    return GO.id if x > LISTED and _far(x) else None\n")
    sys.path.insert(0, str(root))
    try:
        package = importlib.import_module("probe_kind")
        book = importlib.import_module("probe_kind.rules").BOOK
        got = rule_reads(package, book)
    finally:
        sys.path.remove(str(root))
        for mod in [m for m in sys.modules if m.startswith("probe_kind")]:
            del sys.modules[mod]
    assert got.reads == {"probe.go": {"listed"}}
    assert got.unknown == {"probe.go": {"plan:UNLISTED"}}
