"""The store's runs and jobs as the planner's `board.Result`s (issue 14, "Gather").

One result per concluded job attempt (so each RCCL flake counts towards the profile's
limit), and a pending one while the run is still open. The steady TGS is the job's own,
as the engine measured it (`monitor/steady`: steps 9-14 with the profiler, 5-14 without);
the loss is the last step's, read from the job's log with the flags it printed. A job that
ran but whose printed effective flags (last wins) do not show the profile's values is
NOT_APPLIED, with the culprit, never a measured result.

The log reading goes through `_LogReader` below: a thin local stand-in for
`kinds/xla_tuning/logread.py` (effective_flags, unknown_flags, applied), which replaces it
in one place once it lands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from sweepd.core.states import JobState, RunState, SweepState
from sweepd.kinds.xla_tuning.board import Outcome, Result
from sweepd.monitor.facts import FailureClass as F
from sweepd.monitor.facts import StepFact
from sweepd.monitor.parse import parse_line
from sweepd.monitor.steady import steady_window
from sweepd.store.rows import Job, Run
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.store.store import Store

_FLAG = re.compile(r"--([A-Za-z0-9_]+)=(\S*)")
_XLA_LINE = re.compile(r"\bXLA_FLAGS=(.*)$")
_ENV_LINE = re.compile(r"^(?:export\s+)?((?:NCCL|RCCL|XLA_PYTHON|HSA|GPU_MAX)[A-Z0-9_]*)=(\S*)\s*$")
_UNKNOWN = re.compile(r"Unknown flags?(?: in XLA_FLAGS)?:\s*(.*)$")
_ENDED = (JobState.DONE, JobState.FAILED, JobState.RETRIED)


@dataclass(frozen=True)
class LogFacts:
    """What one job's log printed: effective XLA flags and env (last wins), the flags the
    image rejected, the last step's loss."""

    xla: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    steps: tuple[StepFact, ...] = ()  # rank 0's, in order
    printed_flags: bool = False  # False: the log never printed XLA_FLAGS (nothing to check)


class _LogReader:
    """Stand-in for `logread` (names kept): effective flags, unknown flags, applied."""

    @staticmethod
    def effective_flags(lines: Iterable[str]) -> tuple[dict[str, str], dict[str, str], bool]:
        """The last printed XLA_FLAGS, each flag last-wins, and the env lines, last-wins."""
        xla: dict[str, str] = {}
        env: dict[str, str] = {}
        printed = False
        for line in lines:
            m = _XLA_LINE.search(line)
            if m is not None:
                printed = True
                xla = dict(_FLAG.findall(m.group(1).strip().strip("'\"")))
                continue
            e = _ENV_LINE.match(line.strip())
            if e is not None:
                env[e.group(1)] = e.group(2).strip("'\"")
        return xla, env, printed

    @staticmethod
    def unknown_flags(lines: Iterable[str]) -> tuple[str, ...]:
        """`Unknown flags in XLA_FLAGS: --a --b` (and the older `Unknown flag: --a`)."""
        out: list[str] = []
        for line in lines:
            m = _UNKNOWN.search(line)
            if m is not None:
                out += [t.lstrip("-").split("=")[0] for t in m.group(1).split() if t]
        return tuple(dict.fromkeys(out))

    @staticmethod
    def applied(want_xla: Sequence[str], want_env: Mapping[str, str], facts: LogFacts) -> str:
        """'' when every wanted value won; else the culprit (what the job ran instead)."""
        if facts.printed_flags:
            for text in want_xla:
                key, _, value = text.lstrip("-").partition("=")
                got = facts.xla.get(key)
                if got != value:
                    return f"{key}={got if got is not None else '(absent)'} won over {value}"
        for key, value in want_env.items():
            got = facts.env.get(key)
            if got is not None and got != value:
                return f"{key}={got} won over {value}"
        return ""


logread = _LogReader


def read_log(path: str | None) -> LogFacts:
    """A job log's facts (an unreadable log: none)."""
    if not path:
        return LogFacts()
    try:
        text = Path(path).read_text("utf-8", errors="replace")
    except OSError:
        return LogFacts()
    lines = text.splitlines()
    xla, env, printed = logread.effective_flags(lines)
    return LogFacts(xla, env, logread.unknown_flags(lines), _steps(lines), printed)


def _steps(lines: Iterable[str]) -> tuple[StepFact, ...]:
    """Rank 0's step lines, each step once (a restarted tail prints some twice)."""
    seen: dict[int, StepFact] = {}
    for line in lines:
        fact = parse_line(line)
        if isinstance(fact, StepFact) and fact.rank in (None, 0):
            seen.setdefault(fact.step, fact)
    return tuple(seen[k] for k in sorted(seen))


def last_loss(facts: LogFacts) -> float | None:
    return next((s.loss for s in reversed(facts.steps) if s.loss is not None), None)


def step_seconds(facts: LogFacts, profiler: bool) -> float | None:
    """Mean step time over the same steady window as the TGS."""
    window = steady_window(profiler)
    secs = [s.seconds for s in facts.steps if s.step in window and s.seconds is not None]
    return fmean(secs) if secs else None


Reader = Callable[[str | None], LogFacts]


def results(runs: Sequence[Run], jobs: Sequence[Job], read: Reader = read_log) -> list[Result]:
    """Every concluded attempt of every run of the sweep, and a pending result per open run."""
    by_run: dict[int, list[Job]] = {}
    for j in sorted(jobs, key=lambda j: j.id):
        by_run.setdefault(j.run_id, []).append(j)
    out: list[Result] = []
    for run in runs:
        p = run.params
        base = Result(str(p.get("profile", run.label)), str(p.get("tag", "default")),
                      Outcome.PENDING, wave=int(p.get("wave", 0)))
        for job in by_run.get(run.id, []):
            r = attempt(job, base, p, read) if job.state in _ENDED else None
            if r is not None:
                out.append(r)
        if run.state in (RunState.PENDING, RunState.ACTIVE):
            out.append(base)
    return out


def attempt(job: Job, base: Result, params: Mapping[str, Any], read: Reader) -> Result | None:
    """One concluded job as a result; None: it says nothing about the flags (cancelled)."""
    klass = job.failure_class
    if klass == F.CANCELLED:
        return None
    r = replace(base, job_id=job.backend_id or f"#{job.id}", queue_s=_queue_s(job))
    if klass == F.OOM:
        return replace(r, outcome=Outcome.OOM, detail=job.failure_detail or "OOM")
    if klass == F.UNKNOWN_FLAG:
        return replace(r, outcome=Outcome.UNKNOWN_FLAG, detail=job.failure_detail or "?")
    facts = read(job.log_path)
    if klass is None and job.tgs is not None:
        culprit = logread.applied(list(params.get("xla_flags", ())),
                                  dict(params.get("env", {})), facts)
        if culprit:
            return replace(r, outcome=Outcome.NOT_APPLIED, detail=culprit)
        return replace(r, outcome=Outcome.OK, tgs=job.tgs, loss=last_loss(facts),
                       step_s=step_seconds(facts, bool(job.profiler)))
    if facts.unknown:  # the image rejected a flag, though the class says otherwise
        return replace(r, outcome=Outcome.UNKNOWN_FLAG, detail=facts.unknown[0])
    # Anything else says nothing about the flags: run again, at most board.max_flakes times.
    return replace(r, outcome=Outcome.FLAKE, detail=klass or "failed")


def _queue_s(job: Job) -> float:
    if job.submitted_at is None or job.ended_at is None:
        return 0.0
    return max(0.0, job.ended_at - job.submitted_at)


async def facts(store: Store, spec: Any) -> dict[str, Any]:
    """What the planner needs beyond the sweep's own runs (Kind.gather): the latest finished
    model-perf sweep of the same model on as many nodes, whose optimum is the default
    per_device_batch_size (model-perf specs name no parallelism: not compared)."""
    count = int(spec.count)
    for sweep in reversed(await store.sweeps([SweepState.DONE])):
        verdict = sweep.verdict or {}
        if sweep.kind != "model-perf" or sweep.spec.get("model") != spec.model \
                or not verdict.get("settled", True) or not isinstance(verdict.get("best"), int):
            continue
        nodes = verdict.get("nodes") or len(expand_nodes(str(sweep.spec.get("nodes", ""))))
        if int(nodes) == count:
            return {"model_perf": {"sweep": sweep.id, "best": int(verdict["best"])}}
    return {}
