"""Every rule book of sweepd (the engine's, each kind's), and the rule ids its source names
where a decision is recorded: for tests/test_rule_registry.py and scripts/rules_doc.py."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import sweepd
import sweepd.kinds
from sweepd.util.rulebook import RuleBook

PACKAGE = Path(sweepd.__file__).parent
ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
# Calls that record a rule, and the position of the rule among their arguments.
# Dotted literals in a rule namespace that are no rule: config keys, file names.
NOT_RULES = frozenset({"cluster.sim", "cluster.slurm.slurm_conf"})
FILE_SUFFIXES = ("json", "lock", "sh", "yml", "yaml", "db", "log", "py", "md", "txt")
LOG_CALLS = frozenset({"debug", "info", "warning", "error", "exception"})
RULE_ARG = {"Stop": 1, "Action": 1, "Check": 0, "make_verdict": 3, "Planned": 3,
            "_retry_or_record": 1, "NewRun": 4, "Finished": 3}


def kind_folders() -> list[str]:
    return sorted(i.name for i in pkgutil.iter_modules(sweepd.kinds.__path__) if i.ispkg)


def books() -> list[RuleBook]:
    found: list[RuleBook] = [importlib.import_module("sweepd.core.rules").BOOK]
    for name in kind_folders():
        found.append(importlib.import_module(f"sweepd.kinds.{name}.rules").BOOK)
    return found


def registered(emitted: str, every: list[RuleBook]) -> bool:
    return any(book.rule(emitted) is not None for book in every)


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def emitted_ids(namespaces: set[str]) -> dict[str, list[str]]:
    """Rule ids written as literals where the source records a decision: a `rule=`
    argument, the rule's place in a Stop, Action, Check, NewRun, Finished or a planned run,
    a constant named for a rule, and any literal in a rule namespace (`namespaces`: e.g.
    "wave", as xla-tuning's planned tuples carry their rule). id -> where."""
    out: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE.parent))
        tree = ast.parse(path.read_text("utf-8"))
        # A structured log line's event name (`log.warning("controller.gone", ...)`) is
        # no rule: it is never recorded as one.
        events = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and _call_name(n) in LOG_CALLS and n.args}
        for node in ast.walk(tree):
            found: list[ast.expr] = []
            if isinstance(node, ast.Call):
                found += [k.value for k in node.keywords if k.arg == "rule"]
                at = RULE_ARG.get(_call_name(node) or "")
                if at is not None and len(node.args) > at:
                    found.append(node.args[at])
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and "RULE" in t.id for t in node.targets):
                found.append(node.value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    ID.match(node.value) and node.value.split(".")[0] in namespaces and \
                    id(node) not in events and node.value not in NOT_RULES and \
                    node.value.rsplit(".", 1)[1] not in FILE_SUFFIXES:
                found.append(node)
            for value in found:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.setdefault(value.value, []).append(f"{where}:{value.lineno}")
    return out
