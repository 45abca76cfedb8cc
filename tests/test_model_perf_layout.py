"""Model perf's two-parameter search is a subpackage that reads the one-parameter search,
never the other way: the batch search (`search/`, `plan.py`) stays readable alone."""

from __future__ import annotations

import ast
from pathlib import Path

from sweepd.kinds.model_perf import search

KIND = Path(__file__).resolve().parents[1] / "sweepd" / "kinds" / "model_perf"
TWO = "sweepd.kinds.model_perf.two_param"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, inside functions and under TYPE_CHECKING too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_one_parameter_search_never_reads_the_two_parameter_one() -> None:
    one = [*sorted((KIND / "search").glob("*.py")), KIND / "plan.py"]
    assert one[-1].exists() and len(one) > 5
    readers = {p.name: sorted(m for m in _imports(p) if m.startswith(TWO)) for p in one}
    assert {n: ms for n, ms in readers.items() if ms} == {}


def test_the_two_parameter_search_is_its_own_subpackage_that_reads_the_batch_search() -> None:
    package = KIND / "two_param"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    assert modules == {"grid", "pairs", "fraction_step", "fraction_below", "remat_step",
                       "remat_speed"}
    assert ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    reads = set().union(*(_imports(package / f"{m}.py") for m in modules))
    assert search.__name__ in reads
