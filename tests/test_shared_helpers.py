"""Shared test helpers live in modules of their own (tests/support/, tests/*.py without the
test_ prefix), never in a test module another test imports (issue 49, item 3): a test file is
read and changed on its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_test_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [n for n in names if n.split(".")[-1].startswith("test_")
                  and (n.startswith("tests.") or "." not in n)]  # ours, not a library's
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {p.name: mods for p in sorted(TESTS.rglob("*.py"))
                 if "fixtures" not in p.parts and (mods := _imported_test_modules(p))}
    assert offenders == {}


def test_the_scan_sees_both_forms(tmp_path: Path) -> None:
    sample = tmp_path / "test_x.py"
    sample.write_text("from tests import test_a as a\nfrom tests.test_b import f\n"
                      "import tests.test_c\nfrom tests.support import xla\n"
                      "from aiohttp import test_utils\n")
    assert _imported_test_modules(sample) == ["tests.test_a", "tests.test_b", "tests.test_c"]
