"""Counts the test asserts that compare long prose with output, so the count cannot creep back.

An assert counts when it compares (`in`, `not in`, `==`, `!=`, or a `.startswith`/`.endswith`
call) a string literal of at least MIN_CHARS characters, the literal standing anywhere in an
operand (a list of lines counts too). Tests are to assert structures (rule ids, fields, numbers)
and keep the prose a person reads in golden files (tests/golden_files.py); this is the gauge.

    python scripts/count_prose_asserts.py [--max N] [--list] [paths...]

Exits 1 when the count is above --max.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

MIN_CHARS = 30
COMPARE_OPS = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)
AFFIX_CALLS = ("startswith", "endswith")


def _long_literal(node: ast.AST) -> bool:
    """Whether `node` holds a string literal (plain or an f-string's fixed parts) of MIN_CHARS+."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            if len(sub.value) >= MIN_CHARS:
                return True
        elif isinstance(sub, ast.JoinedStr):
            parts = [v.value for v in sub.values if isinstance(v, ast.Constant)]
            fixed = "".join(p for p in parts if isinstance(p, str))
            if len(fixed) >= MIN_CHARS:
                return True
    return False


def _compares_prose(test: ast.expr) -> bool:
    for sub in ast.walk(test):
        if isinstance(sub, ast.Compare) and any(isinstance(op, COMPARE_OPS) for op in sub.ops):
            if any(_long_literal(operand) for operand in [sub.left, *sub.comparators]):
                return True
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in AFFIX_CALLS
            and any(_long_literal(arg) for arg in sub.args)
        ):
            return True
    return False


def prose_asserts(path: Path) -> Iterator[int]:
    """The line numbers of the asserts in `path` that compare long prose."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and _compares_prose(node.test):
            yield node.lineno


def test_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(f for f in sorted(p.rglob("*.py")) if "fixtures" not in f.parts)
        else:
            files.append(p)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--max", type=int, default=None, help="exit 1 when the count is above this")
    parser.add_argument("--list", action="store_true", help="print each assert's file:line")
    parser.add_argument("--by-file", action="store_true", help="print the count of each file")
    args = parser.parse_args(argv)
    paths = args.paths or [Path(__file__).resolve().parent.parent / "tests"]
    total = 0
    for f in test_files(paths):
        lines = list(prose_asserts(f))
        total += len(lines)
        if args.list:
            for line in lines:
                print(f"{f}:{line}")
        if args.by_file and lines:
            print(f"{len(lines):4d} {f}")
    print(f"{total} long-prose asserts")
    if args.max is not None and total > args.max:
        print(f"above the allowed {args.max}: assert structures, or keep prose in a golden file")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
