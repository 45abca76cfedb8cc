"""The package's import graph: no cycle anywhere, and each kind's code is its own: outside
`sweepd/kinds/<kind>/` only the registry imports it (it finds kinds by name), and another kind
reads it through its `exports` module alone (a typed call, not a string).

Imports are read with `ast`, so imports inside functions and under TYPE_CHECKING count too:
a cycle hidden by a local import is still a cycle in the design.
"""

from __future__ import annotations

from tests.support.layering import PACKAGE, _graph, _imports, _module_name, _modules, _resolve  # noqa: F401


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, or None (iterative depth-first search, three colours)."""
    colour = dict.fromkeys(graph, 0)
    for start in sorted(graph):
        if colour[start]:
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path = [start]
        colour[start] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop()
            if colour.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if colour.get(nxt) == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph[nxt])))
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_sweepd() -> None:
    assert _cycle(_graph()) is None, f"import cycle: {' -> '.join(_cycle(_graph()) or [])}"


def test_the_core_imports_no_kind() -> None:
    kind_folders = {p.parent.name for p in (PACKAGE / "kinds").glob("*/__init__.py")}
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items() if m.startswith("sweepd.core")
                   for t in targets if t.split(".")[:2] == ["sweepd", "kinds"]
                   and len(t.split(".")) > 2 and t.split(".")[2] in kind_folders)
    assert wrong == []


def test_util_imports_nothing_else_of_sweepd() -> None:
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items() if m.startswith("sweepd.util")
                   for t in targets if not t.startswith("sweepd.util"))
    assert wrong == []


KINDS = PACKAGE / "kinds"
REGISTRY = "sweepd.kinds.registry"
# Edges that are known and being removed: (importer, imported) with why. None today: the
# train_env arms moved into clusters/ (a submit.sh mechanism for any per-job profile).
ALLOWED: dict[tuple[str, str], str] = {}


def _kind_of(module: str) -> str | None:
    """The kind folder a module belongs to (None: not a kind's)."""
    parts = module.split(".")
    if parts[:2] != ["sweepd", "kinds"] or len(parts) < 3:
        return None
    return parts[2] if (KINDS / parts[2] / "__init__.py").is_file() else None


def _trespasses(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a kind's module from outside its folder but the registry's, and but
    another kind's import of its `exports` module."""
    wrong = []
    for module, targets in graph.items():
        for target in targets:
            kind = _kind_of(target)
            if kind is None or _kind_of(module) == kind or module == REGISTRY:
                continue
            if _kind_of(module) is not None and target == f"sweepd.kinds.{kind}.exports":
                continue
            if (module, target) not in ALLOWED:
                wrong.append(f"{module} -> {target}")
    return sorted(wrong)


def test_the_trespass_finder_finds_one() -> None:
    graph = {"sweepd.cli.x": {"sweepd.kinds.xla_tuning.report"},
             "sweepd.kinds.xla_tuning.runs.gather": {"sweepd.kinds.model_perf.exports",
                                                "sweepd.kinds.model_perf.search"},
             "sweepd.kinds.model_perf.kind": {"sweepd.kinds.model_perf.search"},
             REGISTRY: {"sweepd.kinds.network.kind"}}
    assert _trespasses(graph) == ["sweepd.cli.x -> sweepd.kinds.xla_tuning.report",
                                  "sweepd.kinds.xla_tuning.runs.gather -> "
                                  "sweepd.kinds.model_perf.search"]


def test_each_kind_is_imported_only_from_its_folder_and_the_registry() -> None:
    """Every package: the simulator, the CLI, the API, the reports, the clusters, the core."""
    assert _trespasses(_graph()) == []


def test_the_allowed_exceptions_are_still_needed() -> None:
    """An exception whose import is gone is dropped from the list, not left to excuse a
    new one."""
    graph = _graph()
    assert [edge for edge in ALLOWED if edge[1] not in graph.get(edge[0], set())] == []


def test_no_kind_imports_the_daemon_the_cli_or_the_api() -> None:
    """A kind is called by them (a client action prints through the `ClientOutput` the CLI
    hands it): it never reaches up into `app`, `cli`, `api` or `notify`."""
    upper = ("app", "cli", "api", "notify")
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items()
                   if m.startswith("sweepd.kinds.") for t in targets if t.split(".")[1] in upper)
    assert wrong == []


# The top-level packages (and root modules) of sweepd, highest first: each may import only
# those after it. Written once here; docs/architecture.md ("Imports go one way") says the
# same. A new top-level package fails until it is placed.
PACKAGE_ORDER = ("__main__", "cli", "api", "web", "app", "notify", "core", "kinds", "reports",
                 "clusters", "sim", "monitor", "store", "config", "util")
# Imports against the order that are known, with why. A listed one that is gone fails.
AGAINST_ORDER: dict[tuple[str, str], str] = {
    ("sweepd.sim.hooks", "sweepd.kinds.modules"):
        "the simulator loads each kind's `sim.hook` by name (a plugin lookup that names no "
        "kind; the kinds import the simulator, not the other way)",
    ("sweepd.sim.scenario", "sweepd.kinds.modules"):
        "the scenario's per-kind sections, found by the same plugin lookup",
}


def _package_of(module: str) -> str | None:
    """The top-level package (or root module) a module is in; None: the root package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _against_order(graph: dict[str, set[str]], order: tuple[str, ...]) -> list[str]:
    """Every import of a package placed at or above the importer's own, and every module in
    a package the order does not place."""
    rank = {name: i for i, name in enumerate(order)}
    wrong = []
    for module, targets in graph.items():
        mine = _package_of(module)
        if mine is None:
            continue
        if mine not in rank:
            wrong.append(f"{module}: package {mine!r} is not in the order")
            continue
        for target in targets:
            theirs = _package_of(target)
            if theirs is None or theirs == mine:
                continue
            if (theirs not in rank or rank[theirs] < rank[mine]) \
                    and (module, target) not in AGAINST_ORDER:
                wrong.append(f"{module} -> {target}")
    return sorted(wrong)


def test_the_order_finder_finds_an_import_upward_and_an_unplaced_package() -> None:
    order = ("app", "core", "store")
    graph = {"sweepd.app.daemon": {"sweepd.core.engine", "sweepd.store.rows"},
             "sweepd.store.jobs": {"sweepd.core.states", "sweepd.store.rows"},
             "sweepd.core.plan": {"sweepd.newpkg.x"},
             "sweepd.newpkg.x": set()}
    assert _against_order(graph, order) == [
        "sweepd.core.plan -> sweepd.newpkg.x",
        "sweepd.newpkg.x: package 'newpkg' is not in the order",
        "sweepd.store.jobs -> sweepd.core.states"]


def test_every_import_follows_the_package_order() -> None:
    """`store` names no engine state machine (the states are the store's), `app` never the
    API (the CLI hands the daemon `api.server.FRONT`), `reports` no kind registry (the
    caller hands it the kind's renderer), and so on for every package."""
    assert _against_order(_graph(), PACKAGE_ORDER) == []


def test_every_package_is_placed_once() -> None:
    here = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} \
        | {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert sorted(PACKAGE_ORDER) == sorted(here)


def test_the_imports_against_the_order_are_still_needed() -> None:
    graph = _graph()
    assert [edge for edge in AGAINST_ORDER if edge[1] not in graph.get(edge[0], set())] == []
