"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

import ast
from pathlib import Path

import sweepd

# --- from test_layering ---

PACKAGE = Path(sweepd.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The sweepd module an import names (`from a.b import c`: a.b.c if a module, else a.b)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            if target.startswith("sweepd"):
                resolved = _resolve(target, known)
                if resolved and resolved != module:
                    found.add(resolved)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    # A package's __init__ is imported on the way to its modules: not an edge of its own.
    return {m: {t for t in _imports(m, p, known) if not m.startswith(f"{t}.")}
            for m, p in known.items()}

