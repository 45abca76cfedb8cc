"""Submitting one job, write-ahead, and reconciling a submission a crash left open.

The job row exists (state `submitting`, with a deadline) before the scheduler is asked, so
a crash at any point leaves an attempt the next process finds: it waits for an earlier
submitter still running, adopts the job by its token, or submits again. What it asks of
the engine (stop a sweep, tell the clients) it returns."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from sweepd.clusters.base import (
    ClusterBackend,
    JobProfile,
    JobRequest,
    SpecRefused,
    SubmitRefused,
    Submitted,
)
from sweepd.clusters.submitguard import GuardHeld, end_group, guard_path, holder
from sweepd.core.control import SPEC_REFUSED, SweepStop, apply_stop
from sweepd.core.cost_cap import RULE as CAP_RULE
from sweepd.core.cost_cap import AppliedCap, check_cap
from sweepd.core.strays import Strays
from sweepd.kinds.registry import kind_of
from sweepd.kinds.spec import SweepSpec
from sweepd.store.rows import Job, Run, RunParams, Sweep
from sweepd.store.states import JobState
from sweepd.store.store import InvalidTransition, Store
from sweepd.util.clock import Clock
from sweepd.util.hostlists import expand_nodes
from sweepd.util.worktrees import GitError

if TYPE_CHECKING:
    from sweepd.core.parts import EngineParts

log = structlog.get_logger("sweepd.core.submit")

# Wall seconds past a submitting command's own timeout before its attempt counts as over.
SUBMIT_MARGIN_S = 5.0


@dataclass
class SubmitEffects:
    """What the engine does after a submission: stop the sweep, tell the clients."""

    stop: SweepStop | None = None
    notify: bool = False


async def apply(engine: EngineParts, effects: SubmitEffects) -> None:
    """Act on what a submission returned."""
    if effects.stop is not None:
        await apply_stop(engine, effects.stop)
    if effects.notify:
        engine.notify()


@dataclass
class Submitter:
    store: Store
    backend: ClusterBackend
    clock: Clock
    outputs: Path
    strays: Strays
    spec_of: Callable[[Sweep], SweepSpec]
    cap_of: Callable[[Sweep], AppliedCap]   # the engine's: core/cost_cap.applied_cap, kept
    # Write-ahead jobs whose earlier submitter is still running: told once, ended once.
    _waiting: set[int] = field(default_factory=set, init=False)
    _ended: set[int] = field(default_factory=set, init=False)

    async def new_token(self, sweep_id: int) -> str:
        return f"sw{sweep_id}-{secrets.token_hex(4)}.{await self.strays.store_id()}"

    async def submit(self, sweep: Sweep, run: Run, job: Job) -> SubmitEffects:
        spec = self.spec_of(sweep)
        capped = await self._over_cap(sweep, spec, job)
        if capped is not None:
            return SubmitEffects(stop=capped)
        params = run.params
        workdir = await self._workdir(sweep, params)
        if isinstance(workdir, SweepStop):
            return SubmitEffects(stop=workdir)
        request = job_request(spec, params, token=job.token, nodes=expand_nodes(job.nodes),
                              output_dir=self.outputs / f"sweep-{sweep.id}", workdir=workdir)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        # Write-ahead: until this deadline a crash leaves the attempt open (reconcile).
        deadline = (self.clock.now()
                    + (self.backend.submit_timeout_s + SUBMIT_MARGIN_S) / self.clock.scale)
        await self.store.jobs.update(job.id, submit_deadline=deadline)
        try:
            sub = await self.backend.submit(request)
        except GuardHeld as e:   # an earlier attempt still runs: the next pass waits for it
            log.warning("submit.still_in_flight", job=job.id, error=str(e))
            return SubmitEffects()
        except SubmitRefused as e:
            # A refusal the spec causes repeats on every resume: its own rule, so that the
            # stop message and `resume` say so (core/control.py).
            rule = SPEC_REFUSED if isinstance(e, SpecRefused) else "submit.refused"
            # A status is one line: the refusal's cause (its first line, which says why);
            # the rest (e.g. all of submit.sh's output) is the evidence.
            text = str(e).strip()
            cause = text.splitlines()[0] if text else repr(e)
            await self.store.jobs.transition(job.id, JobState.FAILED,
                                                 f"submission refused: {cause}", rule=rule,
                                                 evidence=text)
            return SubmitEffects(stop=SweepStop(
                sweep, f"submission refused: {cause}", rule=rule, evidence=text,
                failing_nodes=[], recovery="none", outcome="refused before submitting"))
        try:
            await self.store.jobs.transition(
                job.id, JobState.QUEUED, f"submitted as job {sub.backend_id}"
                + (f" ({sub.note})" if sub.note else ""),
                rule="submit.adopted" if sub.note else "engine.submit", evidence=sub.note,
                backend_id=sub.backend_id, log_path=str(sub.log_path), job_name=sub.job_name,
                submitted_at=self.clock.now(),
                profiler=int(spec.profiles_run(run.params.overrides)))
        except InvalidTransition:
            await self._cancel_late(sweep, job, sub)
        for said, rule in ((sub.prepared, "submit.prepared"), (sub.name_note, "submit.name_fit")):
            if said:
                await self.store.events.add(sweep.id, "decision", said, rule=rule,
                                                  run_id=run.id, job_id=job.id,
                                                  evidence=f"token {job.token}")
        return SubmitEffects(notify=True)

    async def _over_cap(self, sweep: Sweep, spec: SweepSpec, job: Job) -> SweepStop | None:
        """The cost cap (core/cost_cap.py): the job that would pass it is not submitted."""
        cap = self.cap_of(sweep)
        totals = await self.store.jobs.span_totals(sweep.id, leave_out=job.id)
        check = check_cap(totals, len(expand_nodes(job.nodes)), cap.hours, cap.node_jobs)
        if not check.passed:
            return None
        said = f"{check.said()} ({cap.source})"
        await self.store.jobs.transition(job.id, JobState.FAILED, f"not submitted: {said}",
                                         rule=CAP_RULE, evidence=said)
        return SweepStop(sweep, f"stopped before its next job: {said}", rule=CAP_RULE,
                         evidence=said, failing_nodes=[], recovery="none",
                         outcome="not submitted (a new spec with a higher max_node_hours "
                                 "goes on)")

    async def reconcile(self, job: Job, now: float) -> SubmitEffects:
        """A job row left in `submitting` by a crash (or a failed call). While the earlier
        submitter may still put the job in the queue, wait; then a last lookup by token
        adopts the job, and only when it is not there is the job submitted again."""
        self.strays.watch((job.submit_deadline or now) + SUBMIT_MARGIN_S / self.clock.scale)
        guard = guard_path(self.outputs / f"sweep-{job.sweep_id}", job.token)
        pgid = await asyncio.to_thread(holder, guard)
        if pgid is not None:
            await self._await_submitter(job, pgid, now)
            return SubmitEffects()
        found = await self.backend.find_by_token(job.token)
        if found is not None:
            await self.store.jobs.transition(
                job.id, JobState.QUEUED, f"found in the queue after a restart as "
                f"{found.backend_id}", rule="recovery.adopt", backend_id=found.backend_id,
                log_path=str(found.log_path), job_name=found.job_name,
                submitted_at=self.clock.now())
            return SubmitEffects()
        run = await self.store.runs.get(job.run_id)
        sweep = await self.store.sweeps.get(job.sweep_id)
        return await self.submit(sweep, run, job)

    async def _await_submitter(self, job: Job, pgid: int, now: float) -> None:
        """An earlier process's sbatch (or submit.sh) still runs: its job may yet appear."""
        if job.submit_deadline is not None and now >= job.submit_deadline:
            if job.id not in self._ended:
                self._ended.add(job.id)
                await self.store.events.add(
                    job.sweep_id, "note", "the earlier submission outlived its deadline: "
                    "ended", rule="recovery.submitter_ended", job_id=job.id, run_id=job.run_id,
                    evidence=f"process group {pgid} still running at the deadline")
            end_group(pgid)
            return
        if job.id not in self._waiting:
            self._waiting.add(job.id)
            await self.store.events.add(
                job.sweep_id, "note", "an earlier submission of this job is still running: "
                "waiting for it before looking the token up", rule="recovery.wait_submitter",
                job_id=job.id, run_id=job.run_id,
                evidence=f"process group {pgid or '?'} holds {job.token}'s submit guard")

    async def _workdir(self, sweep: Sweep, params: RunParams) -> Path | SweepStop | None:
        """Where the run is submitted from, or the stop of a sweep with no checkout."""
        hook = kind_of(sweep.kind).workspace.workdir
        if hook is None:
            return None
        try:
            return await hook(self.spec_of(sweep), params, self.outputs / f"sweep-{sweep.id}")
        except GitError as e:
            return SweepStop(sweep, f"cannot check out {params.commit}: {e}",
                             rule="worktree.failed", evidence=str(e), failing_nodes=[],
                             recovery="none", outcome="no worktree, nothing submitted")

    async def _cancel_late(self, sweep: Sweep, job: Job, sub: Submitted) -> None:
        """The row was ended while its submission was in flight (an abort or a cancel over
        the socket): the job the scheduler made is nobody's, so it is cancelled, on record."""
        await self.store.jobs.update(job.id, backend_id=sub.backend_id,
                                         log_path=str(sub.log_path), job_name=sub.job_name)
        await self.store.events.add(
            sweep.id, "decision", f"job {sub.backend_id} was submitted while its row was "
            "being ended: cancelled", rule="submit.late_cancel", run_id=job.run_id,
            job_id=job.id, evidence=f"token {job.token}")
        await self.backend.cancel(sub.backend_id)


def job_request(spec: SweepSpec, params: RunParams, *, token: str, nodes: list[str],
                output_dir: Path, workdir: Path | None = None) -> JobRequest:
    """What the backend is asked to submit for a run (also what `validate` names)."""
    # The run's own overrides and env (the swept parameter among them) win over the spec's.
    overrides = {k: str(v) for k, v in spec.overrides.items()}
    overrides.setdefault("steps", str(spec.steps))
    overrides.update({k: str(v) for k, v in params.overrides.items()})
    return JobRequest(token=token, model=params.model or spec.model, nodes=nodes,
                      output_dir=output_dir, overrides=overrides,
                      env={**spec.env, **params.env}, xla_flags=params.xla_flags,
                      # the kind's spec names the variable (LIBTPU_INIT_ARGS on TPU)
                      flags_var=getattr(spec, "flags_var", "XLA_FLAGS"),
                      profile=job_profile(spec.env, params),
                      alias=params.alias, tag=params.tag, commit=params.commit,
                      workdir=workdir, partition=getattr(spec, "partition", None),
                      time_limit=params.time_limit)


def job_profile(spec_env: Mapping[str, str], params: RunParams) -> JobProfile | None:
    """The run's profile, with its own env vars: the run's env beyond the spec's (the XLA
    tuning kind's params carry the spec's env too); None for a run without a profile."""
    if params.profile is None:
        return None
    return JobProfile(params.profile,
                      {k: v for k, v in params.env.items() if spec_env.get(k) != v})
