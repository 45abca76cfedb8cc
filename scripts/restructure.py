#!/usr/bin/env python3
"""Issue 13's moves, as a script that can be re-run on a newer main.

Run from the repository root on a clean tree: `python3 scripts/restructure.py`.
It `git mv`s every module in MOVES, rewrites every `sweepd.x.y` reference (imports,
`from sweepd.x import module`, patch targets, `python -m`, entry points) and every
`sweepd/x/y.py` path in sweepd/, tests/, bench/, scripts/, docs/, README.md and
pyproject.toml, then applies the few FIXUPS a move cannot express (kind discovery, where
the SQL files are found). A module found at an old place that is not in MOVES is reported:
add it to MOVES and run again on a fresh checkout.

After a merge of a newer main into the moved branch, `python3 scripts/restructure.py --fix
FILE...` rewrites the files main brought (old module paths, and the names the hand edits
after the move relocated, NAMES) without touching references already moved.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old path -> new path, relative to the repository root.
MOVES: dict[str, str] = {
    # cli/: the command line and the socket client
    "sweepd/cli.py": "sweepd/cli/main.py",
    "sweepd/cli_client.py": "sweepd/cli/verbs.py",
    "sweepd/cli_views.py": "sweepd/cli/views.py",
    "sweepd/client.py": "sweepd/cli/client.py",
    "sweepd/offline.py": "sweepd/cli/offline.py",
    "sweepd/top.py": "sweepd/cli/top.py",
    # app/: daemon lifecycle, foreground run, the service the API and chat call
    "sweepd/daemon.py": "sweepd/app/daemon.py",
    "sweepd/foreground.py": "sweepd/app/foreground.py",
    "sweepd/service.py": "sweepd/app/service.py",
    "sweepd/queries.py": "sweepd/app/queries.py",
    "sweepd/joblog.py": "sweepd/app/joblog.py",
    "sweepd/progress.py": "sweepd/app/progress.py",
    # core/: the state machine, kind-agnostic
    "sweepd/states.py": "sweepd/core/states.py",
    "sweepd/engine.py": "sweepd/core/engine.py",
    "sweepd/jobs.py": "sweepd/core/conclude.py",
    "sweepd/sweeps.py": "sweepd/core/control.py",
    "sweepd/nodes.py": "sweepd/core/node_check.py",
    "sweepd/policy.py": "sweepd/core/policy.py",
    "sweepd/follow.py": "sweepd/core/follow.py",
    "sweepd/metrics.py": "sweepd/core/metrics.py",
    # kinds/: the kind API and registry, then one folder per kind
    "sweepd/specs.py": "sweepd/kinds/spec.py",
    "sweepd/strategies/base.py": "sweepd/kinds/api.py",
    "sweepd/strategies/registry.py": "sweepd/kinds/registry.py",
    "sweepd/strategies/kinds/model_perf.py": "sweepd/kinds/model_perf/kind.py",
    "sweepd/strategies/model_perf.py": "sweepd/kinds/model_perf/search.py",
    "sweepd/strategies/perf_plan.py": "sweepd/kinds/model_perf/plan.py",
    "sweepd/reports/model_perf.py": "sweepd/kinds/model_perf/report.py",
    "sweepd/estimate.py": "sweepd/kinds/model_perf/estimate.py",
    "sweepd/strategies/kinds/node_perf.py": "sweepd/kinds/node_perf/kind.py",
    "sweepd/strategies/node_perf_plan.py": "sweepd/kinds/node_perf/plan.py",
    "sweepd/reports/node_perf.py": "sweepd/kinds/node_perf/report.py",
    "sweepd/strategies/kinds/network.py": "sweepd/kinds/network/kind.py",
    "sweepd/strategies/isolation.py": "sweepd/kinds/network/isolation.py",
    "sweepd/reports/network.py": "sweepd/kinds/network/report.py",
    "sweepd/strategies/kinds/model_sweep.py": "sweepd/kinds/model_sweep/kind.py",
    "sweepd/strategies/model_sweep_plan.py": "sweepd/kinds/model_sweep/plan.py",
    "sweepd/reports/model_sweep.py": "sweepd/kinds/model_sweep/report.py",
    # notify/: which chats a sweep's messages go to
    "sweepd/chats.py": "sweepd/notify/chats.py",
    # util/: small helpers every layer may use
    "sweepd/clock.py": "sweepd/util/clock.py",
    "sweepd/jobname.py": "sweepd/util/jobname.py",
    "sweepd/logs.py": "sweepd/util/logs.py",
    "sweepd/sdnotify.py": "sweepd/util/sdnotify.py",
    "sweepd/worktrees.py": "sweepd/util/worktrees.py",
    "sweepd/models.py": "sweepd/util/model_shapes.py",
    "sweepd/columns.py": "sweepd/util/columns.py",
    "sweepd/text.py": "sweepd/util/text.py",
}
# Packages left empty by the moves.
REMOVED_PACKAGES = ["sweepd/strategies/kinds", "sweepd/strategies", "sweepd/migrations"]
# Modules that stay at the package root on purpose.
ROOT_MODULES = {"__init__.py", "__main__.py", "config.py"}
NEW_PACKAGES = {
    "sweepd/cli": "The command line: argument parsing, client verbs, views, the live view.",
    "sweepd/app": "Daemon lifecycle, the foreground run, and the service the API and chat call.",
    "sweepd/core": "The state machine; names no sweep kind.",
    "sweepd/util": "Small helpers any layer may use; they import nothing else of sweepd's.",
    "sweepd/kinds/model_perf": "Model perf: the batch size with the highest steady TGS.",
    "sweepd/kinds/node_perf": "Node perf: a 1-node run per node, each judged against the median.",
    "sweepd/kinds/network": "Network: group testing for degraded links.",
    "sweepd/kinds/model_sweep": "Model sweep: every model at a commit against a baseline.",
}
TEXT_DIRS = ["sweepd", "tests", "bench", "scripts", "docs", "deploy", "examples"]
TEXT_FILES = ["README.md", "pyproject.toml"]
SUFFIXES = {".py", ".md", ".toml", ".sh", ".yaml", ".yml", ".cfg", ".txt", ".service"}
SKIP = {"scripts/restructure.py"}
SKIP_DIRS = ("docs/reference/",)

FIXUPS: list[tuple[str, str, str]] = [
    # Kinds are folders under sweepd/kinds/ with a `kind.py`; a folder without one
    # (xla_tuning, not wired yet) is not a kind.
    ("sweepd/kinds/registry.py",
     '''    import sweepd.kinds as package

    found: dict[str, Kind] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        kind = module.KIND''',
     '''    import sweepd.kinds as package

    found: dict[str, Kind] = {}
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}.kind"
        if not info.ispkg or importlib.util.find_spec(name) is None:
            continue
        kind = importlib.import_module(name).KIND'''),
    ("sweepd/kinds/registry.py", "import importlib\n", "import importlib\nimport importlib.util\n"),
    ("sweepd/kinds/registry.py",
     "Kinds live in `sweepd/kinds/`, one module each exporting `KIND`;",
     "Kinds live in `sweepd/kinds/`, one folder each whose `kind.py` exports `KIND`;"),
    # The SQL files live in the top-level migrations/; the wheel carries them inside the
    # package (pyproject force-include), a source checkout reads them where they are.
    ("sweepd/store/migrate.py",
     '"""Apply the numbered SQL files in `migrations/` at start-up, in one transaction."""',
     '"""Apply the numbered SQL files in `migrations/` at start-up, in one transaction.\n\n'
     'An installed wheel carries them inside the package (`sweepd/migrations/`, put there by\n'
     'the build); a source checkout (an editable install) reads the top-level folder.\n"""'),
    ("sweepd/store/migrate.py", "from importlib import resources\n",
     "from pathlib import Path\n\nimport sweepd\n"),
    ("sweepd/store/migrate.py",
     '''def migrations() -> list[Migration]:
    found = []
    for entry in resources.files("sweepd.migrations").iterdir():''',
     '''def sql_dir() -> Path:
    package = Path(sweepd.__file__).parent
    shipped = package / "migrations"
    return shipped if shipped.is_dir() else package.parent / "migrations"


def migrations() -> list[Migration]:
    found = []
    for entry in sql_dir().iterdir():'''),
    ("pyproject.toml",
     '[tool.hatch.build.targets.wheel]\npackages = ["sweepd"]\n',
     '[tool.hatch.build.targets.wheel]\npackages = ["sweepd"]\n\n'
     '# The numbered SQL files live at the top; an installed sweepd finds them in its package.\n'
     '[tool.hatch.build.targets.wheel.force-include]\n"migrations" = "sweepd/migrations"\n'),
]


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def module_of(path: str) -> str:
    dotted = path.removesuffix(".py").replace("/", ".")
    return dotted.removesuffix(".__init__")


def move_files() -> None:
    for new in NEW_PACKAGES:
        (ROOT / new).mkdir(parents=True, exist_ok=True)
    for old, new in MOVES.items():
        if (ROOT / old).exists():
            (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
            git("mv", old, new)
    (ROOT / "migrations").mkdir(exist_ok=True)
    for sql in sorted((ROOT / "sweepd/migrations").glob("*.sql")):
        git("mv", str(sql.relative_to(ROOT)), f"migrations/{sql.name}")
    for package in REMOVED_PACKAGES:
        init = ROOT / package / "__init__.py"
        if init.exists():
            git("rm", "-q", str(init.relative_to(ROOT)))
    for package, doc in NEW_PACKAGES.items():
        init = ROOT / package / "__init__.py"
        if not init.exists():
            init.write_text(f'"""{doc}"""\n')
            git("add", str(init.relative_to(ROOT)))


MODULES = {module_of(old): module_of(new) for old, new in MOVES.items()}
MODULES["sweepd.strategies.kinds"] = "sweepd.kinds"
_DOTTED = re.compile(r"(?<![\w./-])(" + "|".join(
    re.escape(m) for m in sorted(MODULES, key=len, reverse=True)) + r")(?![\w])")
PATHS = {**MOVES, "sweepd/migrations/": "migrations/", "sweepd/strategies/kinds/": "sweepd/kinds/"}
_PATHS = re.compile(r"(?<![\w/])(" + "|".join(
    re.escape(p) for p in sorted(PATHS, key=len, reverse=True)) + r")(?![\w])")
_FROM = re.compile(r"^([ \t]*)from (sweepd(?:\.\w+)*) import (\([^)]*\)|[^\n]*)$", re.MULTILINE)
_MARK = "\x00sweepd\x00"


def _split(module: str) -> tuple[str, str]:
    parent, _, leaf = module.rpartition(".")
    return parent, leaf


def _from_import(m: re.Match[str]) -> str:
    indent, base, names = m.group(1), m.group(2), m.group(3)
    body = re.sub(r"#[^\n]*", "", names).strip("() \n")
    items = [n.strip() for n in body.replace("\n", " ").split(",") if n.strip()]
    lines, kept = [], []
    for item in items:
        name, _, alias = item.partition(" as ")
        target = MODULES.get(f"{base}.{name.strip()}")
        if target is None:
            kept.append(item)
            continue
        parent, leaf = _split(target)
        local = alias.strip() or name.strip()
        suffix = "" if local == leaf else f" as {local}"
        lines.append(f"{indent}from {parent.replace('sweepd', _MARK, 1)} import {leaf}{suffix}")
    if not lines:
        return m.group(0)
    if kept:
        lines.insert(0, f"{indent}from {base} import {', '.join(kept)}")
    return "\n".join(lines)


# Names that look like a module but are not one: the systemd unit file.
_KEEP = {'"sweepd.service"': '"sweepd\x00service"'}


def rewrite(text: str) -> str:
    for name, mark in _KEEP.items():
        text = text.replace(name, mark)
    text = _FROM.sub(_from_import, text)
    text = _DOTTED.sub(lambda m: MODULES[m.group(1)].replace("sweepd", _MARK, 1), text)
    text = _PATHS.sub(lambda m: PATHS[m.group(1)].replace("sweepd", _MARK, 1), text)
    for name, mark in _KEEP.items():
        text = text.replace(mark, name)
    return text.replace(_MARK, "sweepd")


def text_files() -> list[Path]:
    found = [ROOT / f for f in TEXT_FILES]
    for d in TEXT_DIRS:
        found += [p for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return [p for p in found if str(p.relative_to(ROOT)) not in SKIP
            and not str(p.relative_to(ROOT)).startswith(SKIP_DIRS)]


def rewrite_all() -> None:
    for path in text_files():
        old = path.read_text("utf-8")
        new = rewrite(old)
        if new != old:
            path.write_text(new, "utf-8")


def apply_fixups() -> None:
    for name, old, new in FIXUPS:
        path = ROOT / name
        text = path.read_text("utf-8")
        if old not in text:
            sys.exit(f"fixup no longer applies to {name}: {old[:60]!r}")
        path.write_text(text.replace(old, new, 1), "utf-8")


def leftovers() -> list[str]:
    root = [p.name for p in (ROOT / "sweepd").glob("*.py") if p.name not in ROOT_MODULES]
    old = [str(p.relative_to(ROOT)) for d in REMOVED_PACKAGES for p in (ROOT / d).glob("*.py")]
    return sorted(root + old)


# (module after the move, name) -> the module the hand edits after the move put it in.
NAMES: dict[tuple[str, str], str] = {
    **{("sweepd.kinds.spec", n): "sweepd.util.hostlists"
       for n in ("MAX_NODES", "count_hostlist", "expand_nodes", "collect_nodes")},
    **{("sweepd.kinds.spec", n): "sweepd.kinds.registry"
       for n in ("parse_spec", "load_spec_file", "read_spec_file")},
    **{("sweepd.kinds.spec", n): "sweepd.kinds.model_perf.spec"
       for n in ("ModelPerfSpec", "BATCH")},
    ("sweepd.kinds.model_sweep.kind", "ModelSweepSpec"): "sweepd.kinds.model_sweep.spec",
    ("sweepd.app.daemon", "AnotherSweepd"): "sweepd.api.errors",
    ("sweepd.sim.plan", "JobInput"): "sweepd.sim.jobinput",
    ("sweepd.reports.plots", "node_perf_plot"): "sweepd.kinds.node_perf.plot",
    ("sweepd.reports.plots", "perf_curve_plot"): "sweepd.kinds.model_perf.plot",
    ("sweepd.reports.plots", "grouped_bars_plot"): "sweepd.kinds.model_sweep.plot",
    ("sweepd.reports.plots", "ratio_bars_plot"): "sweepd.kinds.network.plot",
    **{("sweepd.cli.verbs", n): "sweepd.cli.output"
       for n in ("say", "fail", "format_table", "socket_path", "with_client", "print_error",
                 "load_spec", "print_spec_error", "SOCKET_HELP", "DEFAULT_SOCKET")},
}


def _relocate(m: re.Match[str]) -> str:
    indent, base, body = m.group(1), m.group(2), m.group(3)
    items = [n.strip() for n in re.sub(r"#[^\n]*", "", body).strip("() \n").replace("\n", " ")
             .split(",") if n.strip()]
    groups: dict[str, list[str]] = {}
    for item in items:
        groups.setdefault(NAMES.get((base, item.split(" as ")[0].strip()), base), []).append(item)
    if list(groups) == [base]:
        return m.group(0)
    return "\n".join(f"{indent}from {k} import {', '.join(v)}" for k, v in groups.items())


def fix(paths: list[str]) -> None:
    """Files merged from a newer main: old paths rewritten, moved names relocated. An old
    name that is a prefix of a new package (`sweepd.cli`) is left alone: it is new already."""
    global _DOTTED
    del MODULES["sweepd.cli"]
    _DOTTED = re.compile(r"(?<![\w./-])(" + "|".join(
        re.escape(m) for m in sorted(MODULES, key=len, reverse=True)) + r")(?![\w])")
    for name in paths:
        path = ROOT / name
        old = path.read_text("utf-8")
        new = _FROM.sub(_relocate, rewrite(old))
        if new != old:
            path.write_text(new, "utf-8")
            print(f"fixed {name}")


def main() -> None:
    if sys.argv[1:2] == ["--fix"]:
        fix(sys.argv[2:])
        return
    move_files()
    rewrite_all()
    apply_fixups()
    # Imports the rewrite split or renamed: sorted the way the project's ruff wants.
    subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "I", "--fix", "-q",
                    "sweepd", "tests", "bench", "scripts"], cwd=ROOT, check=False)
    left = leftovers()
    if left:
        sys.exit(f"not moved (add to MOVES): {left}")
    print(f"moved {len(MOVES)} modules; references rewritten")


if __name__ == "__main__":
    main()
