"""The order xla_tuning's parts may import each other in: each part (a subpackage, or a module
at the kind's top) imports only the parts before it in ORDER, and itself. Imports are read with
`ast`, wherever they stand: inside functions and under TYPE_CHECKING too, so a cycle cannot hide
in a deferred import."""

from __future__ import annotations

import ast
from pathlib import Path

import sweepd.kinds.xla_tuning as kind_package

PACKAGE = kind_package.__name__
ROOT = Path(kind_package.__file__).parent

# Written once: lowest first. A part may import the parts before it, never one after it.
ORDER = (
    "thresholds",  # the stop rules' numbers and the planner's defaults: a leaf
    "rules",       # the rule book: reads the record alone
    "catalog",     # what may be tuned and what it does
    "evidence",    # what the runs say, and the board's readings of them
    "inputs",      # what the planner is given
    "spec",        # the sweep's spec
    "deploy",      # the recipe written into the env file; what the file leaves in effect
    "sim",         # the kind's part of the simulated cluster
    "inventory",   # what the planner reads beyond the sweep's runs
    "waves",       # what the next wave may hold
    "verdict",     # when the search stops and what it concludes
    "search",      # the wave planner's loop
    "runs",        # the planner meets the engine: run params, gather, checks, progress
    "reporting",   # what the report is built from, and tuning.md
    "plot",
    "report",      # the report the registry takes (kind folders keep report.py and plot.py)
    "hooks_client",  # the client's report --tuning-md --apply
    "plan",        # the engine's side of the planner
    "replay",      # a whole sweep against a landscape
    "demo",
    "exports",     # what other kinds may read
    "kind",
)


def _part(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").parts[0]


def _imported_parts(path: Path) -> set[str]:
    """The kind's parts that the module at `path` imports, from any statement in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != PACKAGE else [
                f"{PACKAGE}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found |= {name.removeprefix(PACKAGE + ".").split(".")[0]
                  for name in names if name.startswith(PACKAGE + ".")}
    return found


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT) != Path("__init__.py"))


def test_every_part_is_placed_in_the_order() -> None:
    parts = {_part(p) for p in _modules()}
    assert parts == set(ORDER), (
        f"not in ORDER: {sorted(parts - set(ORDER))}; gone: {sorted(set(ORDER) - parts)}")


def test_no_part_imports_one_after_it() -> None:
    rank = {part: i for i, part in enumerate(ORDER)}
    upward = [f"{p.relative_to(ROOT)} imports {target}"
              for p in _modules()
              for target in sorted(_imported_parts(p))
              if rank[target] > rank[_part(p)]]
    assert upward == []


def test_the_reader_sees_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        f"    from {PACKAGE}.reporting.report_view import View\n"
        "def f() -> None:\n"
        f"    from {PACKAGE} import search, rules as book\n"
        f"    import {PACKAGE}.waves.candidates\n")
    assert _imported_parts(module) == {"reporting", "search", "rules", "waves"}


def test_each_subpackage_says_what_it_decides_and_defines_nothing() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), init
        assert all(isinstance(n, ast.Expr | ast.ImportFrom | ast.Import) for n in tree.body), init
