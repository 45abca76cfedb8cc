"""A rule book: the named rules of one part of sweepd (a kind, the engine's policy), each
with the one line saying what it decides and the thresholds it reads, and those thresholds
as pointers to their one definition.

Code that decides names its rule through the book (`RULE.id`), never a second literal;
tests/test_rule_registry.py holds every emitted id to a book and every book's rule to a
test, and scripts/rules_doc.py writes the books into docs/architecture.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Threshold:
    """A number a rule reads: its name in the book, what it means, and where it is defined
    (`module:attr[.attr...]`), read from there (never a copy)."""

    name: str
    where: str
    means: str

    @property
    def value(self) -> Any:
        module, _, path = self.where.partition(":")
        obj: Any = importlib.import_module(module)
        for part in path.split("."):
            # A config section's field: its default (pydantic keeps it off the class).
            fields = getattr(obj, "model_fields", None)
            if isinstance(obj, type) and isinstance(fields, dict) and part in fields:
                return fields[part].default
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class Rule:
    """One decision's name (recorded with the decision in the store), what it decides, and
    the names of the thresholds (in its book) it reads. `family`: the id is a prefix and
    each emitted id adds a part (e.g. the stopped stage's sweep number). `where`: the
    functions it is decided in (`module:function`, relative to the kind's package), for a
    reader going from a rule to its code; empty where the book does not say."""

    id: str
    decides: str
    thresholds: tuple[str, ...] = ()
    family: bool = False
    where: tuple[str, ...] = ()

    def of(self, part: str) -> str:
        """The emitted id of a family member."""
        if not self.family:
            raise ValueError(f"{self.id} is one rule, not a family")
        return f"{self.id}.{part}"

    def names(self, emitted: str) -> bool:
        return emitted == self.id or (self.family and emitted.startswith(f"{self.id}."))


@dataclass(frozen=True)
class RuleBook:
    owner: str                       # a kind's name, or "engine"
    rules: tuple[Rule, ...]
    thresholds: tuple[Threshold, ...] = ()

    def __post_init__(self) -> None:
        # Checked at import: a book that contradicts itself is a bug, never a sweep's input.
        ids = [r.id for r in self.rules]
        if len(ids) != len(set(ids)):
            raise ValueError(f"{self.owner}: a rule id twice")
        names = {t.name for t in self.thresholds}
        if len(names) != len(self.thresholds):
            raise ValueError(f"{self.owner}: a threshold twice")
        unknown = {n for r in self.rules for n in r.thresholds} - names
        if unknown:
            raise ValueError(f"{self.owner}: rules read unlisted thresholds {sorted(unknown)}")

    def rule(self, emitted: str) -> Rule | None:
        """The rule an emitted id names (None: none of this book's)."""
        return next((r for r in self.rules if r.names(emitted)), None)
