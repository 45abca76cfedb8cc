"""The store's runs and jobs as the planner's `board.Result`s (issue 14, "Gather").

One result per concluded job attempt (so each RCCL flake counts towards the profile's
limit), and a pending one while the run is still open. The steady TGS is the job's own,
as the engine measured it (`monitor/steady`: steps 9-14 with the profiler, 5-14 without);
the loss is the last step's. A job that ran but whose printed effective flags and env (last
wins) do not show the profile's values is NOT_APPLIED, with the culprit
(`logread.applied`), never a measured result. The Wave 1.5 evidence is the evidence run's
HLO dump (`logread.hlo_evidence`). All of it is read from the store: each job's facts were
extracted once, from its log as the monitor read it and from its files when it ended
(`jobfacts`, kept on the job: `Job.facts`); no log or dump is read here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sweepd.clusters.train_env import env_file_settings
from sweepd.core.states import JobState, RunState
from sweepd.kinds.api import GatherError
from sweepd.kinds.model_perf import exports as model_perf
from sweepd.kinds.xla_tuning import jobfacts, logread
from sweepd.kinds.xla_tuning.board import EVIDENCE, Outcome, Result
from sweepd.kinds.xla_tuning.catalog import Evidence, Layer, Setting
from sweepd.monitor.facts import FailureClass as F
from sweepd.store.rows import Job, Run, RunParams

if TYPE_CHECKING:
    from sweepd.kinds.registry import GatherContext
    from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
    from sweepd.store.store import Store

_ENDED = (JobState.DONE, JobState.FAILED, JobState.RETRIED)
DUMP_ENV = "ENABLE_XLA_DUMP"   # the evidence run's switch (train_env.sh reads it)
_TRUTHY = ("1", "y", "yes", "true")


@dataclass(frozen=True)
class ModelPerfPrior:
    """The latest finished model-perf sweep of the model on as many nodes: its optimum."""

    sweep: int
    best: int


@dataclass(frozen=True)
class XlaFacts:
    """What the planner reads beyond the sweep's own runs (Kind.gather)."""

    model_perf: ModelPerfPrior | None = None  # the default per_device_batch_size
    # The Inventory: what the model's env file sets (restore_default puts it back).
    deployed: tuple[Setting, ...] = ()
    # Where the Inventory was read (None: no checkout, nothing read).
    env_file: str | None = None
    # submit.sh mode: the env file is sourced after train_env.sh, so an XLA flag it sets
    # cannot be changed by a profile's arm (train_env.placement would refuse the run).
    sourced_last: bool = False

    def fixed_flags(self) -> frozenset[str]:
        """XLA flags no profile can change here (their arms would lose to the env file)."""
        if not self.sourced_last:
            return frozenset()
        return frozenset(s.key for s in self.deployed if s.layer is Layer.XLA)

    def inventory_line(self) -> str:
        """The Inventory as recorded with the sweep's first run."""
        if self.env_file is None:
            return "Inventory: no toolkit checkout (not submit.sh mode): no env file read"
        sets = ", ".join(s.label for s in self.deployed) or "no XLA flag or NCCL/XLA env var"
        return f"Inventory: {self.env_file} sets {sets}"


# The env vars of a model's env file the Inventory keeps (the rest is not tuned here).
_TUNED_ENV = ("NCCL_", "RCCL_", "XLA_PYTHON_")


def inventory(repo: Path | None, model: str) -> tuple[tuple[Setting, ...], str | None]:
    """What the checkout's `configs/<model>.env.sh` sets (last wins), and its path; a missing
    file sets nothing (the model runs as the image has it). No checkout: (), None."""
    if repo is None:
        return (), None
    path = repo / "configs" / f"{model}.env.sh"
    try:
        text = path.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return (), f"{path} (absent)"
    except OSError as e:
        raise GatherError(f"cannot read the model's env file {path}: {e.strerror}") from None
    flags, env = env_file_settings(text)
    out = [Setting(k, v, Layer.XLA) for k, v in flags.items()]
    out += [Setting(k, v, Layer.ENV) for k, v in env.items() if k.startswith(_TUNED_ENV)]
    return tuple(out), str(path)


@dataclass(frozen=True)
class LogFacts:
    """What one job printed and left, as stored on the job (`jobfacts`): its effective XLA
    flags and env (last wins), the flags the image rejected, the last step's loss and the
    steady window's mean step time, and where it printed one, its span on the cluster's
    own clock."""

    eff: logread.Effective = field(default_factory=logread.Effective)
    unknown: tuple[str, ...] = ()
    loss: float | None = None
    step_s: float | None = None   # over the steady window of the TGS (steps 5-14 / 9-14)
    # When the job ran on the cluster's own clock (start, end), where the cluster prints it
    # (the simulated one, whose clock is not the machine's): None elsewhere.
    span: tuple[float, float] | None = None
    dumped: bool = False   # its HLO dump was there when it ended

    @property
    def printed_env(self) -> bool:
        """False: the log printed no environment at all (nothing to check a profile by)."""
        return self.eff.xla_text is not None or bool(self.eff.env)


def stored(job: Job, keys: Iterable[str] = ()) -> LogFacts:
    """A job's facts as the store holds them (none stored: none). `keys`: env vars to
    follow besides the NCCL/RCCL/XLA_PYTHON_CLIENT families (a profile's own)."""
    facts = job.facts
    if not facts:
        return LogFacts()
    span = facts.get("span")
    return LogFacts(jobfacts.effective_of(facts, tuple(keys)), tuple(facts.get("unknown", ())),
                    facts.get("loss"), facts.get("step_s"),
                    (float(span[0]), float(span[1])) if span else None,
                    facts.get("dump") is not None)


def last_loss(facts: LogFacts) -> float | None:
    return facts.loss


def step_seconds(facts: LogFacts) -> float | None:
    """Mean step time over the same steady window as the TGS."""
    return facts.step_s


# A job's facts with the env vars to follow: `stored`, or a test's own.
Reader = Callable[[Job, Iterable[str]], LogFacts]


def wave_of(params: RunParams) -> int:
    try:
        return int(params.wave or 0)
    except ValueError:
        return 0


def settings_of(params: RunParams) -> tuple[Setting, ...]:
    """The profile's XLA flags and env vars, as `logread.applied` checks them."""
    flags = logread.parse_flags(" ".join(params.xla_flags))
    return (*(Setting(k, v, Layer.XLA) for k, v in flags.items()),
            *(Setting(k, v, Layer.ENV) for k, v in params.env.items()))


def results(runs: Sequence[Run], jobs: Sequence[Job], read: Reader = stored,
            deployed: Sequence[Setting] = ()) -> list[Result]:
    """Every concluded attempt of every run of the sweep, and a pending result per open run.
    `deployed`: what the model's env file sets (the Inventory), to say who won over a
    profile that was not applied."""
    by_run: dict[int, list[Job]] = {}
    for j in sorted(jobs, key=lambda j: j.id):
        by_run.setdefault(j.run_id, []).append(j)
    queued = queue_time(jobs, read)
    out: list[Result] = []
    for run in runs:
        p = run.params
        base = Result(p.profile or run.label, p.tag or "default", Outcome.PENDING,
                      wave=wave_of(p))
        for job in by_run.get(run.id, []):
            r = attempt(job, base, p, read, queued.get(job.id, 0.0), deployed) \
                if job.state in _ENDED else None
            if r is not None:
                out.append(r)
        if run.state in (RunState.PENDING, RunState.ACTIVE):
            out.append(base)
    return out


def attempt(job: Job, base: Result, params: RunParams, read: Reader = stored,
            queue_s: float = 0.0, deployed: Sequence[Setting] = ()) -> Result | None:
    """One concluded job as a result; None: it says nothing about the flags (cancelled).
    `queue_s`: its share of the sweep's queue time (`queue_shares`)."""
    klass = job.failure_class
    if klass == F.CANCELLED:
        return None
    r = replace(base, job_id=job.backend_id or f"#{job.id}", queue_s=queue_s)
    if klass == F.OOM:
        return replace(r, outcome=Outcome.OOM, detail=job.failure_detail or "OOM")
    if klass == F.UNKNOWN_FLAG:
        return replace(r, outcome=Outcome.UNKNOWN_FLAG, detail=job.failure_detail or "?")
    facts = read(job, params.env)
    if klass is None and job.tgs is not None:
        miss = why_not_applied(settings_of(params), facts, deployed, dumped(params, facts))
        if miss is not None:
            return replace(r, outcome=Outcome.NOT_APPLIED, detail=miss.culprit)
        return replace(r, outcome=Outcome.OK, tgs=job.tgs, loss=last_loss(facts),
                       step_s=step_seconds(facts))
    if facts.unknown:  # the image rejected a flag, though the class says otherwise
        return replace(r, outcome=Outcome.UNKNOWN_FLAG, detail=facts.unknown[0])
    # Anything else says nothing about the flags: run again, at most board.max_flakes times.
    return replace(r, outcome=Outcome.FLAKE, detail=klass or "failed")


@dataclass(frozen=True)
class Miss:
    """Why a profile's values did not win in its job: the culprit, and its cause (one per
    mechanism, so that several profiles lost the same way are seen as one failure)."""

    cause: str   # UNREACHED, ENV_FILE, NO_FLAGS or LOST
    culprit: str


# None of the profile's settings reached the job: the way a profile reaches a job failed.
UNREACHED = "unreached"
ENV_FILE = "env_file"    # the model's env file's value won (it is sourced later)
NO_FLAGS = "no_flags"    # the log never printed XLA_FLAGS
LOST = "lost"            # some settings won, another value won over this one


def dumped(params: RunParams, facts: LogFacts) -> bool:
    """An evidence run is judged by its artifact too: the HLO dump it asked for exists."""
    if params.env.get(DUMP_ENV, "0").lower() not in _TRUTHY:
        return False
    return facts.dumped


def why_not_applied(settings: Sequence[Setting], facts: LogFacts,
                    deployed: Sequence[Setting] = (), dumped: bool = False) -> Miss | None:
    """Why the profile's values did not win in the job; None when they did, or when the log
    printed no environment at all (a trainer that prints none: nothing to check by; the
    toolkit's `_train.sh` always prints it). The dump switch (`ENABLE_XLA_DUMP`, the
    evidence run's) is judged by its artifact: `dumped`, the job wrote the HLO dump, shows
    it took effect whatever the listing says, and no dump shows it did not, whatever the
    listing says (re-exported after train_env.sh, it is listed but was never read)."""
    if not facts.printed_env:
        return None
    wants_dump = any(s.key == DUMP_ENV and s.value.lower() in _TRUTHY for s in settings)
    checked = [s for s in settings if s.layer is not Layer.MAXTEXT and s.key != DUMP_ENV]
    ok, culprit = logread.applied(checked, facts.eff) if checked else (True, None)
    missed = [s for s in checked if not logread.in_effect(s, facts.eff)]
    if not ok and culprit is not None:
        first = missed[0]
    elif wants_dump and not dumped:
        listed = facts.eff.env.get(DUMP_ENV)
        culprit = ("no HLO dump was written, though the listing shows "
                   f"{DUMP_ENV}={listed}" if listed is not None else
                   f"no HLO dump was written, and {DUMP_ENV} is not set in the job's "
                   "effective environment")
        first = next(s for s in settings if s.key == DUMP_ENV)
    else:
        return None
    if first.layer is Layer.XLA and facts.eff.xla_text is None:
        return Miss(NO_FLAGS, culprit)
    env_file = {s.key: s for s in deployed}
    own = env_file.get(first.key)
    if own is not None and logread.in_effect(own, facts.eff):
        return Miss(ENV_FILE, f"{culprit} (the model's env file sets {own.label}, and it "
                              "is sourced after train_env.sh)")
    reached = [s for s in checked if s not in missed]
    if not reached and (not wants_dump or not dumped):
        where = ("" if own is not None or first.key == DUMP_ENV else
                 f"; the model's env file does not set {first.key}")
        return Miss(UNREACHED, f"{culprit}: none of the profile's settings reached the job"
                               + where)
    return Miss(LOST, culprit)


def not_applied(settings: Sequence[Setting], facts: LogFacts,
                deployed: Sequence[Setting] = (), dumped: bool = False) -> str | None:
    """The culprit when the profile's values did not win in the job (`why_not_applied`)."""
    miss = why_not_applied(settings, facts, deployed, dumped)
    return None if miss is None else miss.culprit


@dataclass(frozen=True)
class Unapplied:
    """A finished job whose profile was not applied."""

    profile: str
    job_id: str
    miss: Miss


def unapplied(runs: Sequence[Run], jobs: Sequence[Job], deployed: Sequence[Setting] = (),
              read: Reader = stored) -> list[Unapplied]:
    """Every finished job of the sweep whose profile did not take effect, in job order."""
    by_id = {r.id: r for r in runs}
    out: list[Unapplied] = []
    for job in sorted(jobs, key=lambda j: j.id):
        run = by_id.get(job.run_id)
        if run is None or job.state not in _ENDED or job.failure_class is not None \
                or job.tgs is None:
            continue
        facts = read(job, run.params.env)
        miss = why_not_applied(settings_of(run.params), facts, deployed,
                               dumped(run.params, facts))
        if miss is not None:
            out.append(Unapplied(run.params.profile or run.label,
                                 job.backend_id or f"#{job.id}", miss))
    return out


def queue_time(jobs: Sequence[Job], read: Reader = stored) -> dict[int, float]:
    """Each ended job's share of the sweep's queue time (`queue_shares`), on the cluster's
    own clock where the job logs print one (the simulator's)."""
    return queue_shares(jobs, {j.id: span for j in jobs if j.state in _ENDED
                               and (span := read(j, ()).span) is not None})


def queue_shares(jobs: Sequence[Job],
                 clock: Mapping[int, tuple[float, float]] | None = None) -> dict[int, float]:
    """Each ended job's share of the sweep's queue time: the time from its submission to its
    end not already covered by an earlier-submitted job. They add up to the time the sweep
    had a job in the queue (the 8 h timebox), not to the sum of overlapping waits: a wave
    of 8 jobs submitted together is queued for as long as its last one takes.

    `clock`: job id -> (start, end) on the cluster's own clock, where the cluster keeps one
    apart from the machine's (the simulated cluster, `LogFacts.span`). Then every time rule
    reads that clock alone, so a scenario and seed give the same sweep however loaded the
    machine is; a job it does not time (cancelled while queued) holds no time there."""
    spans: list[tuple[float, int, float]]
    if clock:
        spans = [(a, i, b) for i, (a, b) in clock.items()]
    else:
        spans = [(j.submitted_at, j.id, j.ended_at) for j in jobs
                 if j.submitted_at is not None and j.ended_at is not None]
    out: dict[int, float] = {}
    covered = float("-inf")
    for start, job_id, end in sorted(spans):
        out[job_id] = max(0.0, end - max(start, covered))
        covered = max(covered, end)
    return out


_SIM_INVENTORY: dict[tuple[str, int, str, str], tuple[Setting, ...]] = {}


def sim_inventory(scenario: Path, spec: XlaTuningSpec) -> tuple[tuple[Setting, ...], str | None]:
    """On the simulated cluster the model's env file is its tuning landscape's `deployed`
    (what its jobs run with as baseline-deployed); read once per scenario file version."""
    from sweepd.kinds.xla_tuning.sim.tuning import parallelism_overrides, tuning_for
    from sweepd.sim.scenario import load_scenario  # the simulator only when it is the backend

    try:
        key = (str(scenario), scenario.stat().st_mtime_ns, spec.model, spec.parallelism)
    except OSError:
        return (), None
    if key not in _SIM_INVENTORY:
        try:
            tuning = tuning_for(load_scenario(scenario).section("tuning"), spec.model)
            land = None if tuning is None else tuning.landscape_for(
                parallelism_overrides(spec.parallelism))
        except ValueError:   # no landscape for the parallelism: its jobs will say so
            land = None
        _SIM_INVENTORY[key] = () if land is None else land.deployed_settings()
    where = f"the simulated cluster's tuning landscape for {spec.parallelism} ({scenario})"
    return _SIM_INVENTORY[key], where


async def facts(store: Store, spec: XlaTuningSpec, where: GatherContext) -> XlaFacts:
    """What the planner needs beyond the sweep's own runs (Kind.gather): the Inventory (the
    checkout's `configs/<model>.env.sh`, submit.sh mode) and the latest finished
    model-perf sweep of the same model on as many nodes, whose optimum is the default
    per_device_batch_size (model-perf specs name no parallelism: not compared)."""
    if where.backend == "sim":
        from sweepd.sim.scenario import DEFAULT_SCENARIO  # the simulator only when used
        deployed, env_file = sim_inventory(where.scenario or DEFAULT_SCENARIO, spec)
    else:
        deployed, env_file = inventory(where.repo, spec.model)
    prior = await model_perf_prior(store, spec)
    return XlaFacts(prior, deployed, env_file, sourced_last=where.repo is not None)


async def model_perf_prior(store: Store, spec: XlaTuningSpec) -> ModelPerfPrior | None:
    found = await model_perf.latest_optimum(store, spec.model, spec.count)
    return None if found is None else ModelPerfPrior(found.sweep, found.best)


# ---- the Wave 1.5 evidence -------------------------------------------------------------------

def evidence(runs: Sequence[Run], jobs: Sequence[Job], read: Reader = stored
             ) -> Evidence | None:
    """The Wave 1.5 evidence: the HLO dump of the latest evidence run that finished, as read
    once at its end (its steady step time turns bytes into shares of the step); None until
    then."""
    ids = {r.id for r in runs if r.params.profile == EVIDENCE}
    done = [j for j in jobs if j.run_id in ids and j.state == JobState.DONE]
    for job in sorted(done, key=lambda j: -j.id):
        if read(job, ()).dumped:
            return jobfacts.evidence_of(job.facts)
    return None
