"""What each rule's decision reads, read off the code (an AST scan, no hand list): the
functions that name a rule of the book (`rules.WINNER.id`) are where it decides; from each,
the calls into the kind's own functions are followed (not into another rule's deciding
functions, whose numbers are that rule's), and every module constant the book lists
(`module:NAME`) and every record field read off the planner's inputs (`inp.win`) found on
the way is a number the rule decides with. A module constant holding a number that the
book does not list, read on the way, is one too, kept apart as unknown to the book
(`Reads.unknown`): a number added beside a rule without registering it shows there."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import ModuleType

from sweepd.util.rulebook import Rule, RuleBook

# A property of the record read as what it is made of.
DERIVED = {"max_queue_s": "max_queue_hours"}


@dataclass
class _Module:
    name: str
    tree: ast.Module
    funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # local → (module, attr)
    modules: dict[str, str] = field(default_factory=dict)  # local alias → module


def _module(name: str, path: Path) -> _Module:
    mod = _Module(name, ast.parse(path.read_text("utf-8")))
    for node in mod.tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mod.funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            mod.funcs.update({f"{node.name}.{i.name}": i for i in node.body
                              if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)})
    return mod


def _imports(mod: _Module, known: set[str]) -> None:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in known:
                    mod.modules[a.asname or a.name] = full
                else:
                    mod.names[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.Import):
            mod.modules.update({a.asname or a.name: a.name for a in node.names})


def _numeric(node: ast.expr | None) -> bool:
    """A number written out (never a bool), or a sum or product of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    # A tuple or a dict of numbers is a table (a distribution's quantiles, units, an order
    # of statuses), never one knob; a threshold's value is one number (test_rule_registry).
    return False


def _numbers(mod: _Module) -> set[str]:
    """The module's constants that hold numbers (`HEALTHY_BAND = -0.02`)."""
    out: set[str] = set()
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and _numeric(node.value):
            out.add(node.targets[0].id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and _numeric(node.value):
            out.add(node.target.id)
    return out


def _index(package: ModuleType) -> dict[str, _Module]:
    root = Path(package.__file__ or "").parent
    out: dict[str, _Module] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
        name = ".".join([package.__name__, *parts])
        out[name] = _module(name, path)
    for mod in out.values():
        _imports(mod, set(out))
    return out


@dataclass(frozen=True)
class Reads:
    """Each rule id → the book's threshold names its decision reads, and where it decides."""

    reads: dict[str, set[str]]
    sites: dict[str, set[str]]
    # Each rule id → the module constants holding numbers its decision reads that the book
    # lists nowhere (`module:NAME`, the module relative to the package).
    unknown: dict[str, set[str]] = field(default_factory=dict)


Site = tuple[str, str]


class _Scan:
    def __init__(self, package: ModuleType, book: RuleBook, record: type | None) -> None:
        self.package = package
        self.index = _index(package)
        self.consts = {tuple(t.where.split(":", 1)): t.name for t in book.thresholds
                       if "." not in t.where.split(":", 1)[1]}
        self.record = ({f.name for f in fields(record)} if record is not None
                       and is_dataclass(record) else set())
        self.by_field = {t.where.rsplit(".", 1)[1]: t.name for t in book.thresholds
                         if ":THRESHOLDS." in t.where}
        # A module's own name for a field of the record (`CLIMB = THRESHOLDS.climb`, as model
        # perf's search names its numbers): a read of that field wherever it is named.
        for mod in self.index.values():
            for node in mod.tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name) \
                        and isinstance(node.value, ast.Attribute) \
                        and isinstance(node.value.value, ast.Name) \
                        and node.value.value.id in ("T", "THRESHOLDS") \
                        and node.value.attr in self.by_field:
                    self.consts[(mod.name, node.targets[0].id)] = self.by_field[node.value.attr]
        self.numbers = {(mod.name, name) for mod in self.index.values()
                        for name in _numbers(mod)} - set(self.consts)
        self.rules = next(m for m in self.index.values() if m.name.endswith(".rules"))
        self.rule_names = {name: value.id for name, value in vars(importlib.import_module(
            self.rules.name)).items() if isinstance(value, Rule)}
        # Module constants holding a rule's id (`RULE = rule_book.QUIET.id`): its names.
        self.aliases: dict[Site, set[str]] = {}
        for mod in self.index.values():
            for node in mod.tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name):
                    refs = self.rule_refs(mod, node.value)
                    if refs:
                        self.aliases[(mod.name, node.targets[0].id)] = refs

    def rule_refs(self, mod: _Module, fn: ast.AST) -> set[str]:
        out: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Name):
                out |= self.aliases.get(mod.names.get(n.id, (mod.name, n.id)), set())
                if n.id in self.rule_names and \
                        mod.names.get(n.id, ("", ""))[0] == self.rules.name:
                    out.add(self.rule_names[n.id])
            elif (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and mod.modules.get(n.value.id) == self.rules.name
                    and n.attr in self.rule_names):
                out.add(self.rule_names[n.attr])
        return out

    def sites(self, decided_in: dict[str, tuple[str, ...]]) -> dict[Site, set[str]]:
        sites = {(mod.name, qual): refs for mod in self.index.values() if mod is not self.rules
                 for qual, fn in mod.funcs.items() if (refs := self.rule_refs(mod, fn))}
        for rule_id, places in decided_in.items():
            for site in [s for s, ids in sites.items() if rule_id in ids]:
                sites[site] = sites[site] - {rule_id}
            for place in places:
                module, _, qual = place.partition(":")
                key = (f"{self.package.__name__}.{module}", qual)
                assert qual in self.index[key[0]].funcs, place
                sites[key] = sites.get(key, set()) | {rule_id}
        return sites

    def read(self, mod: _Module, n: ast.AST) -> str | None:
        """The book's name for the number `n` reads, if any."""
        if isinstance(n, ast.Name):
            return self.consts.get(mod.names.get(n.id, (mod.name, n.id)))
        if not isinstance(n, ast.Attribute):
            return None
        base = n.value
        if isinstance(base, ast.Name) and base.id in mod.modules:
            return self.consts.get((mod.modules[base.id], n.attr))
        holder = (base.id if isinstance(base, ast.Name)
                  else base.attr if isinstance(base, ast.Attribute) else "")
        attr = DERIVED.get(n.attr, n.attr)
        if holder in ("inp", "T", "THRESHOLDS") and (attr in self.record or (
                holder != "inp" and attr in self.by_field)):   # a derived one (`T.flat`)
            return self.by_field.get(attr)
        return None

    def unknown(self, mod: _Module, n: ast.AST) -> str | None:
        """`module:NAME` of a module constant holding a number that `n` reads, where the
        book lists it nowhere."""
        if isinstance(n, ast.Name):
            at = mod.names.get(n.id, (mod.name, n.id))
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id in mod.modules:
            at = (mod.modules[n.value.id], n.attr)
        else:
            return None
        if at not in self.numbers:
            return None
        return f"{at[0].removeprefix(self.package.__name__ + '.')}:{at[1]}"

    def callee(self, mod: _Module, qual: str, f: ast.expr) -> Site | None:
        """The kind's own function a call reaches (a module's, or the class's own method)."""
        if isinstance(f, ast.Name):
            target = mod.names.get(f.id, (mod.name, f.id))
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "self" and "." in qual:
                target = (mod.name, f"{qual.split('.')[0]}.{f.attr}")
            elif f.value.id in mod.modules:
                target = (mod.modules[f.value.id], f.attr)
            else:
                return None
        else:
            return None
        return target if target[0] in self.index and \
            target[1] in self.index[target[0]].funcs else None

    def direct(self, at: Site) -> tuple[set[str], set[str], set[Site]]:
        """The book's names `at` reads, the unknown numbers it reads, the calls it makes."""
        mod = self.index[at[0]]
        reads: set[str] = set()
        unknown: set[str] = set()
        calls: set[Site] = set()
        for n in ast.walk(mod.funcs[at[1]]):
            name = self.read(mod, n)
            if name is not None:
                reads.add(name)
            elif (other := self.unknown(mod, n)) is not None:
                unknown.add(other)
            if isinstance(n, ast.Call) and (c := self.callee(mod, at[1], n.func)):
                calls.add(c)
        return reads, unknown, calls

    def closure(self, site: Site, rule_id: str, sites: dict[Site, set[str]]
                ) -> tuple[set[str], set[str]]:
        """What a rule's deciding function reads (the book's names, and numbers the book
        does not know), and the functions it calls but those where another rule decides."""
        seen: set[Site] = set()
        todo, got, unknown = [site], set[str](), set[str]()
        while todo:
            at = todo.pop()
            if at in seen:
                continue
            seen.add(at)
            r, u, calls = self.direct(at)
            got |= r
            unknown |= u
            todo += [c for c in calls if not (sites.get(c, set()) - {rule_id})]
        return got, unknown


def rule_reads(package: ModuleType, book: RuleBook, record: type | None = None,
               decided_in: dict[str, tuple[str, ...]] | None = None) -> Reads:
    """`decided_in`: rule id → its deciding functions (`module:function`, relative to the
    package), where a function that names the rule only cites it (in a note) is not one."""
    scan = _Scan(package, book, record)
    sites = scan.sites(decided_in or {})
    reads: dict[str, set[str]] = {}
    where: dict[str, set[str]] = {}
    unknown: dict[str, set[str]] = {}
    for site, ids in sites.items():
        for rule_id in ids:
            got, other = scan.closure(site, rule_id, sites)
            reads.setdefault(rule_id, set()).update(got)
            if other:
                unknown.setdefault(rule_id, set()).update(other)
            where.setdefault(rule_id, set()).add(f"{site[0]}:{site[1]}")
    return Reads(reads, where, unknown)
