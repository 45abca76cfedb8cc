"""The store's runs and jobs as the planner's `board.Result`s (issue 14, "Gather").

One result per concluded job attempt (so each RCCL flake counts towards the profile's
limit), and a pending one while the run is still open. The steady TGS is the job's own,
as the engine measured it (`monitor/steady`: steps 9-14 with the profiler, 5-14 without);
the loss is the last step's. A job that ran but whose printed effective flags and env (last
wins) do not show the profile's values is NOT_APPLIED, with the culprit
(`applied.why_not_applied`), never a measured result. The Wave 1.5 evidence is the evidence
run's HLO dump (`logread.hlo_evidence`). All of it is read from the store, each job's facts
as `logfacts.stored` reads them; no log or dump is read here. What the planner reads beyond
the sweep's own runs is `planner_facts.py`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sweepd.kinds.xla_tuning.catalog.catalog import Evidence, Setting
from sweepd.kinds.xla_tuning.evidence import jobfacts
from sweepd.kinds.xla_tuning.evidence.applied import Miss, dumped, settings_of, why_not_applied
from sweepd.kinds.xla_tuning.evidence.logfacts import Reader, last_loss, step_seconds, stored
from sweepd.kinds.xla_tuning.evidence.results import EVIDENCE, Outcome, Result
from sweepd.kinds.xla_tuning.runs.run_params import WAVE
from sweepd.monitor.facts import FailureClass as F
from sweepd.store.rows import Job, Run, RunParams
from sweepd.store.states import JobState, RunState

_ENDED = (JobState.DONE, JobState.FAILED, JobState.RETRIED)


def wave_of(params: RunParams) -> int:
    """The run's wave, from the label `run_params` wrote; 0 for a run without one."""
    try:
        return int(params.labels.get(WAVE) or 0)
    except ValueError:
        return 0


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
                       step_s=step_seconds(facts), run_noise=facts.run_noise)
    if facts.unknown:  # the image rejected a flag, though the class says otherwise
        return replace(r, outcome=Outcome.UNKNOWN_FLAG, detail=facts.unknown[0])
    # Anything else says nothing about the flags: run again, at most board.max_flakes times.
    return replace(r, outcome=Outcome.FLAKE, detail=klass or "failed")


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
