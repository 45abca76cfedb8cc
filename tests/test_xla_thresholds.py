"""xla-tuning's stop rules and planner defaults have one record (`thresholds.THRESHOLDS`):
the spec's `Thresholds` is generated from it, the planner's `Inputs` is it (a subclass), the
rule book points at it, no second copy of a default comes back (a literal default for one of
the record's names in the kind), and every number a rule's decision reads, read off the code,
is in that rule's list."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import ValidationError

import sweepd.kinds.xla_tuning as kind_package
from sweepd.kinds.xla_tuning import rules
from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.spec import Thresholds, XlaTuningSpec
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS, XlaThresholds, spec_fields
from tests.rule_reads import Reads, rule_reads

ROOT = Path(kind_package.__file__).parent
NAMES = {f.name for f in fields(XlaThresholds)}
# A record's name for something else: the simulated landscapes' true run-to-run noise (the
# same 0.008, which the planner's prior `noise` only guesses at) and true drift (a rate,
# where the record's `drift` is how a claim reads the baseline), and a verdict's flag
# saying its recipe is confirmed over the bar (the planner's and the stored structure's).
OTHER_KNOBS = {("catalog/landscape.py", "Landscape", "noise"),
               ("catalog/landscape.py", "Landscape", "drift"),
               ("waves/planned.py", "Verdict", "win"),
               ("verdict/structure.py", "Conclusion", "win")}


def test_the_spec_section_and_the_planner_are_the_record_not_copies_of_it() -> None:
    # The planner's inputs are the record itself, with the cell added: none of its fields
    # is declared again there.
    assert issubclass(Inputs, XlaThresholds)
    assert set(Inputs.__dataclass_fields__) >= NAMES
    assert NAMES & set(vars(Inputs).get("__annotations__", {})) == set()
    # The spec's section is generated from the fields marked `spec`, their bounds with them.
    assert list(Thresholds.model_fields) == list(spec_fields())
    assert NAMES - set(Thresholds.model_fields) == {"focus", "stop", "quiet", "proposer"}
    with pytest.raises(ValidationError):
        Thresholds(win=2.0)   # the record's bound, 0 < win <= 1
    assert XlaTuningSpec.model_fields["stop"].default == THRESHOLDS.stop
    assert XlaTuningSpec.model_fields["proposer"].default == THRESHOLDS.proposer
    assert Inputs(Parallelism.parse("FSDP=8"), ()).max_queue_s == 8 * 3600


def test_a_spec_without_thresholds_plans_with_the_records_numbers() -> None:
    spec = XlaTuningSpec.model_validate({"kind": "xla-tuning", "model": "llama2-70b",
                                         "node_count": 8, "parallelism": "FSDP=8"})
    inp = spec.inputs()
    got = {name: getattr(inp, name) for name in NAMES if name != "max_queue_hours"}
    assert got == {name: getattr(THRESHOLDS, name) for name in got}
    assert inp.max_queue_s == THRESHOLDS.max_queue_s == 8 * 3600


def test_the_rule_book_reads_the_record() -> None:
    book = {t.name: t for t in rules.BOOK.thresholds}
    for name in NAMES:
        assert book[name].where == f"sweepd.kinds.xla_tuning.thresholds:THRESHOLDS.{name}"
        assert book[name].value == getattr(THRESHOLDS, name)
    assert (book["win"].value, book["bounded_gain"].value, book["bounded_count"].value) == \
        (0.05, 0.02, 25)   # the SKILL.md's, the default


def _literal(node: ast.expr | None) -> bool:
    """A default written as a number, a bool or a string, or a `Field(default=...)` of one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float | str)
    if isinstance(node, ast.UnaryOp | ast.BinOp):
        return all(_literal(n) for n in ast.iter_child_nodes(node) if isinstance(n, ast.expr))
    if isinstance(node, ast.Call):
        return any(k.arg == "default" and _literal(k.value) for k in node.keywords)
    return False


def _literal_defaults(path: Path, root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(file, class or function, name) of each field or parameter named after a record
    field whose default is a literal."""
    out: list[tuple[str, str, str]] = []
    where = str(path.relative_to(root))
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and \
                        item.target.id in NAMES and _literal(item.value):
                    out.append((where, node.name, item.target.id))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            pos = [*args.posonlyargs, *args.args]
            pairs = [*zip(pos[len(pos) - len(args.defaults):], args.defaults, strict=True),
                     *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
            out += [(where, node.name, a.arg) for a, d in pairs
                    if a.arg in NAMES and _literal(d)]
    return out


def test_no_second_copy_of_a_records_default_in_the_kind() -> None:
    found = {hit for p in sorted(ROOT.rglob("*.py")) if p.name != "thresholds.py"
             for hit in _literal_defaults(p)}
    assert found - OTHER_KNOBS == set()
    # The scan sees what it looks for (the landscape's own noise).
    assert found >= OTHER_KNOBS


def test_the_scan_finds_a_copy_written_anew(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from pydantic import BaseModel, Field\n"
                     "class Thresholds(BaseModel):\n    win: float = Field(default=0.05, gt=0)\n"
                     "class Inputs:\n    max_flags: int = 3\n    noise: float = T.noise\n"
                     "def truth(land, max_flags: int = 3, *, wave_size=8): ...\n")
    hits = {(c, n) for _, c, n in _literal_defaults(probe, tmp_path)}
    assert hits == {("Thresholds", "win"), ("Inputs", "max_flags"), ("truth", "max_flags"),
                    ("truth", "wave_size")}


def test_the_sub_bar_options_reach_the_planner_from_the_spec() -> None:
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec

    base = {"kind": "xla-tuning", "model": "llama2-70b", "nodes": "n[1-8]",
            "parallelism": "PP=8"}
    plain = XlaTuningSpec.model_validate(base).inputs()
    assert (plain.on_leader, plain.closing_pair) == (False, False)   # the SKILL.md's waves
    spec = XlaTuningSpec.model_validate(
        {**base, "thresholds": {"on_leader": True, "closing_pair": True}})
    chosen = spec.inputs()
    assert (chosen.on_leader, chosen.closing_pair) == (True, True)


def _reads() -> Reads:
    return rule_reads(kind_package, rules.BOOK, XlaThresholds, rules.DECIDED_IN)


def test_every_number_a_rules_decision_reads_is_in_its_list() -> None:
    got = _reads()
    unlisted = {r.id: sorted(got.reads.get(r.id, set()) - set(r.thresholds))
                for r in rules.BOOK.rules}
    assert {k: v for k, v in unlisted.items() if v} == {}
    # Every rule's decision is found in the code (a scan finding none would pass anything).
    assert {r.id for r in rules.BOOK.rules} - set(got.sites) == set()
    # No number read on the way is one the book does not list (13 were, the proposers' and
    # the quiet caveat's among them, before they were registered).
    assert got.unknown == {}


def test_the_scan_follows_the_winner_rule_into_the_modules_it_reads() -> None:
    got = _reads()
    # stop.winner decides in verdict/stops.py and reads claims.py's, wave_rules.py's and
    # the board's numbers through the calls it makes (issue 49: none were in its list).
    assert got.sites[rules.WINNER.id] == {"sweepd.kinds.xla_tuning.verdict.stops:winner"}
    assert {"confirm_base_n", "near_base_n", "z_one", "z_clear", "z_near", "near_fresh",
            "win", "regress"} <= got.reads[rules.WINNER.id]
    # A rule cited in another's note is not decided there (`DECIDED_IN`).
    assert got.sites[rules.NO_COLLECTIVES.id] == {
        "sweepd.kinds.xla_tuning.waves.no_collectives:without_collectives"}


def test_two_knobs_never_share_a_name() -> None:
    # The book's names, and the names of what they point at, each once: two knobs once
    # shared BASE_N (6 baseline runs beside a bounded question, 3 behind a confirmation).
    attrs = [t.where.rsplit(":", 1)[1].rsplit(".", 1)[-1] for t in rules.BOOK.thresholds]
    assert len(attrs) == len(set(attrs))
    book = {t.name: t.value for t in rules.BOOK.thresholds}
    assert (book["confirm_base_n"], book["bounded_base_n"]) == (3, 6)
