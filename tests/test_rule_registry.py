"""Every decision sweepd records names a registered rule, and every registered rule is
exercised by a test: the rule books (`sweepd/core/rules.py`, `sweepd/kinds/<kind>/rules.py`)
against the ids the source writes where it records a decision, the ids real sweeps (the
kinds' demos on the simulated cluster) record in the store, and the ids the tests name."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweepd.config import PolicyConfig
from sweepd.core.policy import Case, SweepFacts, decide
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import Verdict
from sweepd.util.rulebook import Rule, RuleBook, Threshold
from tests.rule_books import books, emitted_ids, kind_folders, registered

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# Registered rules no test names yet (by id or by an imported constant), each with where it
# is recorded: the test below fails once a test names one (take it off) or when another
# rule joins them.
NOT_YET_EXERCISED: dict[str, str] = {}


def _namespaces(every: list[RuleBook]) -> set[str]:
    return {r.id.split(".")[0] for b in every for r in b.rules}


def test_every_kind_has_a_rule_book_whose_thresholds_resolve() -> None:
    every = books()
    assert {b.owner for b in every} == {"engine", *kind_folders()}
    for book in every:
        assert book.rules, book.owner
        for t in book.thresholds:
            assert isinstance(t.value, int | float | str), (book.owner, t.name, t.where)


def test_a_book_refuses_a_rule_reading_an_unlisted_threshold() -> None:
    with pytest.raises(ValueError, match="unlisted thresholds"):
        RuleBook("k", (Rule("k.x", "x", ("missing",)),))
    with pytest.raises(ValueError, match="a rule id twice"):
        RuleBook("k", (Rule("k.x", "x"), Rule("k.x", "y")))
    book = RuleBook("k", (Rule("k.stage", "a family", family=True),),
                    (Threshold("noise", "sweepd.kinds.model_perf.thresholds:THRESHOLDS.noise",
                               "n"),))
    assert book.rule("k.stage.4") is not None and book.rule("k.stagex") is None
    assert book.thresholds[0].value == 0.01


def test_every_rule_id_the_source_records_is_registered() -> None:
    every = books()
    found = emitted_ids(_namespaces(every))
    unregistered = {i: w for i, w in found.items() if not registered(i, every)}
    assert unregistered == {}
    # The scan finds the ids (a scan that found nothing would pass anything).
    for known in ("model_perf.budget_gap", "wave.catalog", "oom.never_retry", "network.half"):
        assert known in found


def test_the_scan_finds_an_id_no_book_holds(tmp_path: Path) -> None:
    import tests.rule_books as scan

    src = tmp_path / "sweepd"
    src.mkdir()
    (src / "x.py").write_text('Stop("why", "model_perf.invented")\n'
                              'p = ("a", "t", "wave.invented", "why")\n'
                              'log.warning("wave.logged")\n')
    old = scan.PACKAGE
    scan.PACKAGE = src
    try:
        found = scan.emitted_ids({"wave", "model_perf"})
    finally:
        scan.PACKAGE = old
    assert set(found) == {"model_perf.invented", "wave.invented"}
    assert not registered("model_perf.invented", books())


# Each failure class as the policy decides it, fresh and with its retries used up.
POLICY_RULES = {
    F.CONFIG: ("config.stop", "config.stop"),
    F.UNKNOWN: ("unknown.retry_bounded", "retries.max"),
    F.PULL: ("pull.retry", "service.retries_exhausted"),
    F.CONTROLLER_DOWN: ("controller_down.retry", "service.retries_exhausted"),
    F.HOST_OOM: ("host_oom.retry", "retries.max"),
    F.COMPILE: ("compile.retry", "retries.max"),
    F.NO_GPU: ("no_gpu.retry", "retries.max"),
    F.PYTHON: ("python.retry", "retries.max"),
    F.COLLECTIVE_TIMEOUT: ("collective_timeout.retry", "retries.max"),
}


@pytest.mark.parametrize("klass", list(POLICY_RULES))
def test_each_failure_class_decides_under_its_registered_rule(klass: F) -> None:
    failed = Verdict(klass, evidence="line")
    facts = SweepFacts(["n1", "n2"], (), 1)
    fresh = decide(Case(failed, (), facts, PolicyConfig()))
    spent = decide(Case(failed, (failed, failed), facts, PolicyConfig()))
    assert (fresh.rule, spent.rule) == POLICY_RULES[klass]
    assert registered(fresh.rule, books()) and registered(spent.rule, books())


def test_a_node_fault_on_no_known_node_is_retried_under_its_rule() -> None:
    facts = SweepFacts(["n1", "n2"], (), 1)
    action = decide(Case(Verdict(F.GPU_HARDWARE, evidence="line"), (), facts, PolicyConfig()))
    assert action.rule == "fault.retry"


def test_a_config_error_is_a_run_result_where_the_kind_judges_each_run() -> None:
    facts = SweepFacts(["n1"], (), 1, config_stops=False)
    action = decide(Case(Verdict(F.CONFIG, evidence="line"), (), facts, PolicyConfig()))
    assert action.rule == "config.run_failed"


def _demo(kind: str, state: Path) -> dict[str, set[str]]:
    """Runs `sweepd demo --kind K` on the simulated cluster; the rules its store recorded,
    by event kind."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "sweepd", "demo", "--kind", kind,
                           "--tick", "0.01", "--state-dir", str(state)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(state / "sweepd.db") as db:
        rows = db.execute("SELECT kind, rule FROM events WHERE rule IS NOT NULL AND rule != ''")
        out: dict[str, set[str]] = {}
        for kind_of_event, rule in rows:
            out.setdefault(kind_of_event, set()).add(rule)
    return out


@pytest.mark.parametrize(("kind", "expected"), [
    ("model-perf", {"model_perf.first_probe", "model_perf.optimum", "engine.start",
                    "engine.submit", "fault.exclude_node", "success"}),
    ("node-perf", {"node_perf.baseline", "node_perf.confirm", "strategy.verdict"}),
    ("network", {"network.whole", "network.half", "network.cross", "network.verify",
                 "strategy.verdict"}),
    ("xla-tuning", {"wave1.baseline", "stop.winner", "engine.start", "success",
                    "submit.name_fit"}),
])
def test_a_demo_records_only_registered_rules(kind: str, expected: set[str],
                                              tmp_path: Path) -> None:
    recorded = _demo(kind, tmp_path / "state")
    every = books()
    seen = set().union(*recorded.values())
    assert {r for r in seen if not registered(r, every)} == set()
    assert expected <= seen
    # Each job's start is recorded under one of two rules, whichever the engine hears first
    # (the scheduler or the log's first line): which one depends on the machine's load.
    assert seen & {"scheduler.running", "log.first_output"}
    # The verdict carries its deciding rule, not a generic one.
    deciding = {"model-perf": "model_perf.optimum", "xla-tuning": "stop.winner"}
    if kind in deciding:
        assert deciding[kind] in recorded["transition"]
        assert "strategy.verdict" not in seen
    if kind == "xla-tuning":
        # The evidence run's profiler overrides make its name too long: the name drops an
        # override, recorded with the job it names and its token.
        with sqlite3.connect(tmp_path / "state" / "sweepd.db") as db:
            fits = db.execute("SELECT e.reason, e.evidence, j.token FROM events e JOIN jobs j "
                              "ON j.id = e.job_id WHERE e.rule = 'submit.name_fit'").fetchall()
        assert fits and all(reason.startswith("job name without ") and evidence == f"token {t}"
                            for reason, evidence, t in fits), fits


def _test_files() -> list[Path]:
    return [p for p in TESTS.rglob("*.py") if p.name != "rule_books.py"]


def _named_in_tests() -> str:
    return "\n".join(p.read_text("utf-8", errors="replace") for p in _test_files())


def _imported_by_tests() -> set[str]:
    """The rule ids tests import by name: a constant holding one (`EVIDENCE_RULE`), or a
    rule book's rule (`rules.BUDGET_GAP`)."""
    ids: set[str] = set()
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sweepd")):
                continue
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if isinstance(value, Rule):
                    ids.add(value.id)
                elif isinstance(value, str):
                    ids.add(value)
    return ids


def test_every_registered_rule_is_exercised_by_a_test() -> None:
    text = _named_in_tests()
    # This file's own list of the untested does not count as a test of them.
    listed = re.compile(r"^    \"[a-z0-9_.]+\": \"", re.M)
    text = listed.sub("", text)
    imported = _imported_by_tests()
    unexercised = {r.id for b in books() for r in b.rules if r.id not in imported
                   and not re.search(rf"[\"']{re.escape(r.id)}[\"'.]", text)}
    assert unexercised == set(NOT_YET_EXERCISED)


def test_the_architecture_doc_shows_every_book_as_generated() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "rules_doc.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    for book in books():   # each book's rules and thresholds, from the book itself
        assert f"### {book.owner} (" in doc
        assert all(f"`{r.id}" in doc for r in book.rules)
        assert all(f"`{t.name}` | {t.value!r} |" in doc for t in book.thresholds)


def test_no_two_thresholds_of_a_book_are_one_definition_or_one_name() -> None:
    # A knob is named once in its book and defined once: two book entries pointing at one
    # definition, or two definitions under one name in two modules (xla-tuning's BASE_N
    # meant 6 baseline runs in one and 3 in another), say one knob twice or two as one.
    for book in books():
        wheres = [t.where for t in book.thresholds]
        assert len(wheres) == len(set(wheres)), book.owner
        attrs = [w.rsplit(":", 1)[1] for w in wheres]
        assert len(attrs) == len(set(attrs)), book.owner
