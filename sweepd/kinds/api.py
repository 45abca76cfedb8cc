"""What a sweep strategy answers: the next runs to add, or the sweep's verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from sweepd.store.rows import Job, Run, RunParams, StepRow


class GatherError(ValueError):
    """What a kind's gather could not find (an earlier sweep the spec names, a commit): a
    submission is refused with it; a sweep already running ends failed with it."""


class NodeFaults(StrEnum):
    """What a hardware fault on a node does to a sweep of the kind (`Kind.node_faults`)."""

    EXCLUDE = "exclude"   # the node is excluded and the run retried elsewhere (multi-node)
    RECORD = "record"     # the node's own run records it: per-node sweeps judge nodes
    # Results compare only on the same nodes: the sweep stops for a person (never an
    # exclusion nor a substitute node).
    STOP = "stop"


@dataclass(frozen=True)
class NewRun:
    label: str
    params: RunParams
    nodes: Sequence[str]
    reason: str
    rule: str
    # Progress lines (Telegram) the engine records with the run: e.g. a kind's kickoff, the
    # results that led to this wave. Said once: a run is planned once.
    progress: Sequence[str] = ()


# The rule a verdict is recorded under when its kind names none of its own.
GENERIC_VERDICT = "strategy.verdict"


@dataclass(frozen=True)
class Finished:
    ok: bool                      # False: the sweep failed (no usable result)
    summary: str                  # one line for progress and the sweep's reason
    verdict: dict[str, Any] = field(default_factory=dict)
    # The rule that decided the verdict (one of the kind's rule book), recorded with it.
    rule: str = GENERIC_VERDICT


@dataclass(frozen=True)
class Stop:
    """The strategy asks a person (e.g. a model sweep's fail-fast rule)."""

    reason: str
    rule: str
    evidence: str | None = None


@dataclass(frozen=True)
class StartSweep:
    """A kind that chains sweeps (a campaign) starts its next stage: a normal sweep of
    another kind (`spec`, as a person would submit it), linked to this sweep under `stage`,
    with what the chain has found so far recorded beside it (None: unchanged). The engine
    plans this sweep again once that sweep has ended or stopped to ask."""

    stage: str
    spec: dict[str, Any]
    nodes: str | None = None        # the frozen nodelist
    batch: int | None = None        # the batch found
    recipe: Sequence[str] | None = None   # the flags found
    progress: Sequence[str] = ()


Plan = list[NewRun] | Finished | Stop | StartSweep


# What a kind's gather found in the store for its planner (an earlier sweep, commits' SHAs):
# each kind its own type.
FactsT = TypeVar("FactsT")


@dataclass(frozen=True)
class SweepContext(Generic[FactsT]):
    runs: Sequence[Run]
    nodes: Sequence[str]          # pinned nodes minus active exclusions
    gpu_memory_gib: float
    facts: FactsT                 # Kind.gather's answer, fresh for this plan
    jobs: Sequence[Job] = ()      # the sweep's jobs: what each run's log said (e.g. memory)
    # Rules of stops a person already resumed from: the planner must not raise them again.
    acknowledged_stops: Sequence[str] = ()
    gpus_per_node: int = 8        # the cluster's (cluster.gpus_per_node)
    # The config names gpu_memory_gib (False: `gpu_memory_gib` is its default, or 0 where
    # the backend leaves the pool unknown: config.ClusterConfig.planning_pool).
    pool_given: bool = True
    # How the person's runs take their settings (config.ClusterConfig.settings_form):
    # "toolkit" (configs/<model>.gpu.yml) or "overrides" (key=value after the train command).
    settings_form: str = "toolkit"
    # The cluster is one box (the local backend): every run on the same accelerator, so a
    # run's steps show the noise between its runs (model perf's measured_noise, unset, is on).
    one_box: bool = False


def open_runs(runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.state in ("pending", "active")]


@dataclass(frozen=True)
class EndedJob:
    """A job at its end, for `JobFacts.ended`: its row (`job.facts`: what its log gave),
    its run's params, and its rank-0 steps as the monitor stored them."""

    job: Job
    params: RunParams
    steps: Sequence[StepRow]


# A job's kind facts: a JSON object (str keys; str, number, bool, None, list, dict values).
Facts = dict[str, Any]


@dataclass(frozen=True)
class JobFacts:
    """What a kind wants from each of its jobs beyond what the monitor stores for every
    job (steps, signals, memory), extracted once and kept on the job in the store
    (`Job.facts`), so that its gather, planner and report read the store, never a log.

    `lines(facts so far, new lines)`: the facts with a batch of the job's new log lines
    folded in, or None when the batch holds nothing new. Pure and cheap (it sees every
    line of the kind's jobs); the log pass stores its answer in the transaction that
    moves the log's offset, so a restarted daemon neither loses nor re-reads a line.
    `ended(job)`: the facts completed once the job has ended and its log is read to the
    end (e.g. from a file the job wrote, never its log), or None: nothing to add. Called
    once, in a worker thread, before the job is judged; stored before any plan reads it."""

    lines: Callable[[Mapping[str, Any], Sequence[str]], Facts | None]
    ended: Callable[[EndedJob], Facts | None] | None = None
