"""Each sweep kind: its spec, its planner, its report, its gather, and its optional hooks in
groups (budget, stops, workspace, client, preflight, plot, demo).

Kinds live in `sweepd/kinds/`, one folder each whose `kind.py` exports `KIND`; they are
discovered here, so adding a kind touches no shared file.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sweepd.kinds.api import FactsT, JobFacts, NodeFaults, Plan, SweepContext
from sweepd.kinds.spec import SweepSpec
from sweepd.store.rows import Job, Run, RunParams, Sweep

if TYPE_CHECKING:
    import argparse

    from sweepd.config import Config
    from sweepd.store.store import Store

SpecT = TypeVar("SpecT", bound=SweepSpec)
Table = Callable[[Sweep, Sequence[Run], Sequence[Job]], str]
Rows = Callable[[Sweep, Sequence[Run], Sequence[Job]], list[dict[str, Any]]]


@dataclass(frozen=True)
class GatherContext:
    """What a kind's gather may read beyond the store: the toolkit checkout of submit.sh
    mode (its `configs/<model>.env.sh`, `train_env.sh`), None on other backends; the
    backend's name and, on the simulated cluster, its scenario file (None: its embedded
    default), which a kind that models its jobs there reads as its stand-in for the checkout."""

    repo: Path | None = None
    backend: str | None = None      # None: called outside the daemon
    scenario: Path | None = None
    # The sweep being planned (None: a submission, a validation): a kind whose facts are
    # its own stages' sweeps (a campaign) finds them by it.
    sweep: int | None = None
    # Where jobs' outputs go (`<outputs>/sweep-<id>/`, beside their logs): a kind that asks
    # a job to write a file there (xla-tuning's HLO dump) names it from this.
    outputs: Path | None = None


NO_CONTEXT = GatherContext()  # a gather called outside the daemon (tests, tools)


def gather_context(config: Config) -> GatherContext:
    """The daemon's gather context: the checkout only where jobs are submitted from it."""
    cluster = config.cluster
    submit_sh = cluster.backend == "slurm" and cluster.slurm.mode == "submit_sh"
    return GatherContext(cluster.slurm.repo if submit_sh else None, cluster.backend,
                         cluster.sim.scenario, outputs=config.daemon.outputs)


@dataclass(frozen=True)
class Check:
    """One pre-flight check made at submission, recorded as a decision (rule, evidence)
    once the sweep exists; a failed one refuses the submission with its text."""

    rule: str
    text: str
    evidence: str
    ok: bool = True


@dataclass(frozen=True)
class PreflightContext:
    """What a kind's pre-flight may ask: the cluster backend (`clusters.base.ClusterBackend`),
    the checkout, the partition jobs go to (None: the scheduler's default). `resumed`: the
    runs of the sweep a person resumes (None: a submission), so that what the sweep itself
    left (e.g. its arms in train_env.sh) is told from what another left."""

    backend: Any
    where: GatherContext
    partition: str | None
    resumed: Sequence[Run] | None = None


async def no_facts(store: Store, spec: SweepSpec, where: GatherContext) -> None:
    """The gather of a kind that needs nothing beyond the sweep's own runs."""


@dataclass(frozen=True)
class Demo:
    """`sweepd demo --kind K`: what it prints first, the simulated cluster's scenario (with
    the kind's seeded fault), the specs it runs one after another, and what the simulator
    knew that the sweep had to find out (a last line; None: nothing to add)."""

    header: str
    scenario: Path
    specs: list[dict[str, Any]]
    truth: Callable[[Config], Coroutine[Any, Any, str]] | None = None


# `report --apply` given without a FILE: the daemon's submit.sh checkout (a kind's action
# names the file there).
THE_CHECKOUT = Path()


@dataclass(frozen=True)
class ClientOutput:
    """How a kind's client action speaks: the CLI's own printing (`cli/output.py`), handed
    in so that a kind imports nothing of the CLI. `fail` prints one clear refusal (JSON with
    --json) and returns the exit code; `say(text, err=...)` escapes control characters."""

    fail: Callable[[argparse.Namespace, str], int]
    say: Callable[..., None]
    print_json: Callable[[Any], None]


def output_path(text: str) -> Path:
    """A report flag's file or directory to write into. A path ending in a separator names
    a directory: one that does not exist is refused here (Path drops the separator, and
    `--tuning-md newdir/` wrote a file named `newdir`)."""
    path = Path(text)
    if text.endswith(("/", os.sep)) and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    return path


@dataclass(frozen=True)
class ReportFlag:
    """One option a kind adds to `sweepd report` (`cli/report.py` adds every kind's). Kinds
    that take the same flag (model perf's, xla-tuning's and the campaign's `--apply`)
    declare the same `options`; its help is each kind's part, named by its kinds.
    `acts`: given, `report` runs the kind's `report_action` in place of printing the report;
    a modifier of such a flag (`--force`, `--commit`) does not act."""

    name: str                                   # e.g. "--apply"
    help: str                                   # what the flag does on this kind's sweeps
    acts: bool = False
    # argparse's `add_argument` keywords beyond the help (`nargs`, `const`, `type`, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    completes_files: bool = False               # the shell completes a file name for it

    @property
    def dest(self) -> str:
        """Its attribute on the parsed arguments (argparse's: `--tuning-md` → tuning_md)."""
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class ClientHooks:
    """What a kind adds to `sweepd report` beyond its table: parts of the JSON report the
    daemon serves, the report flags it takes, and what the CLI does with them when a person
    asks (`--apply`, `--tuning-md`: files written with the person's own permissions)."""

    # Parts of the JSON report beyond the generic ones; takes the toolkit checkout the
    # daemon submits from (None: none, or a state directory read without a daemon).
    report_extras: Callable[[Sweep, Sequence[Run], Sequence[Job], Path | None],
                            dict[str, Any]] | None = None
    # Run by the CLI on the JSON report when one of its acting flags is given; the exit code.
    report_action: Callable[[argparse.Namespace, dict[str, Any], ClientOutput], int] | None = None
    report_flags: tuple[ReportFlag, ...] = ()   # the `sweepd report` options it declares

    @property
    def flags(self) -> frozenset[str]:
        """The dests of its flags that run `report_action` (e.g. "apply", "tuning_md")."""
        return frozenset(f.dest for f in self.report_flags if f.acts)


Plot = Callable[[Sweep, Sequence[Run], Sequence[Job]], bytes | None]
Preflight = Callable[[SpecT, PreflightContext], Awaitable[list[Check]]]
Bound = Callable[[Mapping[str, Any]], int | None]


@dataclass(frozen=True)
class Report:
    """What the report, the CLI and the bot show of a sweep: its markdown table, the same
    rows as JSON, and whether it names one model (False: a sweep of many models)."""

    table: Table
    rows: Rows
    one_model: bool = True


@dataclass(frozen=True)
class Budget:
    """The most a sweep of a spec (its stored JSON) may make, for progress and `validate`:
    runs (None: no fixed bound) and node-runs (None: each run takes every pinned node)."""

    runs: Bound | None = None
    node_runs: Bound | None = None
    # The most node-hours and how they were bounded, from the spec and the policy's
    # retries, for a kind whose jobs carry their own time limits (None: the configured
    # time limit, else earlier jobs, decide).
    node_hours: Callable[[Mapping[str, Any], int], tuple[float, str] | None] | None = None
    # Where `runs` is None: why no most is fixed, in one line (`validate` says it).
    unbounded: str | None = None


@dataclass(frozen=True)
class Stops:
    """What the engine does at a stop in the kind's own words."""

    # True: a config error (every node fails the same way) stops the sweep. False: it is
    # the run's own result (a model sweep judges each model; all failing = commit broken).
    on_config_error: bool = True
    # The stop message's title and "Sweep state at stop" lines (None, or a None answer:
    # the generic ones).
    state: Callable[[Sweep, Sequence[Run], Sequence[Job]],
                    tuple[str, list[str]] | None] | None = None
    # Files the kind writes for the person at a stop (e.g. a partial deliverable) in the
    # sweep's directory; returns the stop message's line about them (None: nothing written).
    files: Callable[[Sweep, Sequence[Run], Sequence[Job], Path], str | None] | None = None


@dataclass(frozen=True)
class Workspace(Generic[SpecT]):
    """Where the engine submits a run from, and what it removes once the sweep ends."""

    # The directory to submit a run from (e.g. a checkout of the run's commit); None, or a
    # None answer: the configured repo. Called before every submission; must be idempotent.
    workdir: Callable[[SpecT, RunParams, Path], Awaitable[Path | None]] | None = None
    # Removes what `workdir` made, once the sweep has ended (done, failed or aborted);
    # returns what it removed. Takes the spec and the sweep's directory.
    release: Callable[[SpecT, Path], Awaitable[list[Path]]] | None = None


@dataclass(frozen=True)
class Kind(Generic[SpecT, FactsT]):
    """What the rest of sweepd asks a kind. Required: its spec, planner, report and gather;
    the optional hooks come in groups, each read by one part of sweepd."""

    name: str
    spec: type[SpecT]
    plan: Callable[[SpecT, SweepContext[FactsT]], Plan]
    report: Report
    # Facts the planner needs from the store beyond the sweep's own runs (e.g. a prior
    # sweep, the checkout's env file), read before every plan; raises GatherError when they
    # cannot be had (`no_facts`: nothing to read).
    gather: Callable[[Store, SpecT, GatherContext], Awaitable[FactsT]]
    # What a hardware fault on a node does: exclude it and retry elsewhere, record it as
    # the node's own result, or stop the sweep (a frozen nodelist).
    node_faults: NodeFaults = NodeFaults.EXCLUDE
    budget: Budget = Budget()                      # app/progress.py, `validate`
    stops: Stops = Stops()                         # the engine's stop and its fault policy
    workspace: Workspace[SpecT] = Workspace()      # the engine's submit and a sweep's end
    # Checks made once, at submission (and at a resume); None: none.
    preflight: Preflight[SpecT] | None = None
    # A PNG where a picture says more than the table (None: nothing to draw yet).
    plot: Plot | None = None
    # `sweepd demo --kind <name>` on the simulated cluster (None: the kind has no demo).
    demo: Demo | None = None
    client: ClientHooks = ClientHooks()            # `sweepd report`'s extras and actions
    # Per-job facts the kind extracts once (log lines as the monitor reads them, files at
    # the job's end) and keeps on the job in the store: `core/kind_facts.py`.
    job_facts: JobFacts | None = None

    # The engine's fault policy reads the node-fault policy and the stop group as these facts.
    @property
    def exclude_on_fault(self) -> bool:
        """False: the node's own run records a fault (never excluded for it)."""
        return self.node_faults is not NodeFaults.RECORD

    @property
    def frozen_nodes(self) -> bool:
        """True: a node fault stops the sweep for a person."""
        return self.node_faults is NodeFaults.STOP


@cache
def kinds() -> dict[str, Kind[Any, Any]]:
    import sweepd.kinds as package

    found: dict[str, Kind[Any, Any]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}.kind"
        if not info.ispkg or importlib.util.find_spec(name) is None:
            continue
        kind = importlib.import_module(name).KIND
        found[kind.name] = kind
    return found


def kind_of(name: str) -> Kind[Any, Any]:
    try:
        return kinds()[name]
    except KeyError:
        raise ValueError(f"unknown sweep kind {name!r}") from None
