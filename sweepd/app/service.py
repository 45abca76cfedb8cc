"""The operations the socket API, the CLI and the chat offer, over the store and engine.

What a spec must pass to be accepted is app/admission.py; `validate`'s dry run is
app/dryrun.py; the daemon's own health for `/health` and `status` (its start, recovery,
last pass, version and scheduler probe), app/health.py's `DaemonHealth`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sweepd.app import slot
from sweepd.app.admission import Admission
from sweepd.app.dryrun import dry_run
from sweepd.app.health import DaemonHealth
from sweepd.app.progress import sweep_progress
from sweepd.app.queries import Queries
from sweepd.core.control import abort, resume
from sweepd.core.engine import Engine
from sweepd.kinds.registry import Check, kind_of
from sweepd.store.rows import Event
from sweepd.store.states import JOB_ACTIVE, SweepState
from sweepd.util.model_shapes import MODELS


class Service(Queries):
    # The chats a spec may name (the daemon sets them from its Telegram settings); None:
    # this process sends to no chat, nothing to check.
    allowed_chats: frozenset[int] | None = None

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.store)   # report, explain, job_log: read-only, store alone
        self.engine = engine
        # The daemon's own state (/health, `status`): started, recovered, its last pass.
        self.health = DaemonHealth(engine)
        # What a spec must pass, at submit, validate and (its pre-flight) resume.
        self.admission = Admission(engine)

    def request_stop(self) -> dict[str, Any]:
        """`sweepd stop`: the daemon's stop event, as SIGTERM sets it (app/daemon.py): the
        engine stops between two jobs, the socket closes, the state stays for a restart."""
        stop = self.engine.stopping
        if stop is None:   # not a served daemon (an in-process service): nothing to stop
            return {"stopping": False}
        stop.set()
        return {"stopping": True}

    async def submit(self, data: Any, submitted_by: str | None = None) -> dict[str, Any]:
        # A SpecError with field-level errors when it does not parse or fit.
        spec = self.admission.parse(data, self.toolkit_repo(), self.allowed_chats)
        await self.admission.refuse_unknown_partition(spec)
        # A slot (partition + node_count) becomes named idle nodes now, frozen in the spec.
        spec, chosen = await self.admission.resolve_slot(spec)
        # What the spec refers to (an earlier sweep, a commit) must hold now, not fail the
        # sweep a moment after it was accepted.
        facts = await self.admission.gather(spec)
        await self.admission.refuse_strangers(spec.node_list)
        checks = await self.admission.preflight(spec)
        name = spec.name or spec.default_name()
        sweep_id = await self.store.sweeps.create(spec.kind, name,
                                                        spec.model_dump(mode="json"), submitted_by)
        # Its first plan takes these facts instead of gathering them again.
        self.engine.gathered.keep(sweep_id, facts, self.engine.clock.now())
        if chosen is not None:
            await self.store.events.add(sweep_id, "decision", chosen.text, rule=slot.RULE,
                                              evidence=chosen.evidence)
        for check in checks:
            await self.store.events.add(sweep_id, "decision", check.text, rule=check.rule,
                                              evidence=check.evidence)
        self.engine.wake()   # started and planned now, not at the next tick
        self.engine.notify()
        return await self.summary(sweep_id)

    async def summary(self, sweep_id: int) -> dict[str, Any]:
        s = await self.store.sweeps.get(sweep_id)
        runs = await self.store.runs.of_sweep(sweep_id)
        # Updated = the latest thing that happened to it (a job, a run), not only its state.
        updated = max(s.updated_at, await self.store.events.last_at(sweep_id) or "")
        link = await self.store.campaigns.parent_of(sweep_id)   # a campaign's stage: its campaign
        return {"id": s.id, "kind": s.kind, "name": s.name, "state": s.state,
                "reason": s.reason, "created_at": s.created_at, "updated_at": updated,
                "runs": len(runs), "verdict": s.verdict, "submitted_by": s.submitted_by,
                "campaign": {"id": link.campaign_id, "stage": link.stage} if link else None,
                "progress": sweep_progress(s, runs, await self.store.jobs.of_sweep(sweep_id))}

    async def list_sweeps(self) -> list[dict[str, Any]]:
        return [await self.summary(s.id) for s in await self.store.sweeps.all()]

    async def show(self, sweep_id: int) -> dict[str, Any]:
        out = await self.summary(sweep_id)
        out["spec"] = (await self.store.sweeps.get(sweep_id)).spec
        # Each run's params typed (as `RunParams` holds them), beside the row's stored JSON.
        out["run_list"] = [{**r.as_dict(), "params": r.params.model_dump(mode="json")}
                           for r in await self.store.runs.of_sweep(sweep_id)]
        out["jobs"] = [j.as_dict() for j in await self.store.jobs.of_sweep(sweep_id)]
        out["exclusions"] = [e.as_dict()
                             for e in await self.store.exclusions.of_sweep(sweep_id, False)]
        out["events"] = [e.as_dict() for e in await self.store.events.of_sweep(sweep_id)]
        out["leftovers"] = await self.leftovers(sweep_id)
        # A campaign's stages: each a sweep of its own, in the order they started.
        out["stages"] = [{"stage": c.stage, "sweep": c.child_id,
                          "state": (await self.store.sweeps.get(c.child_id)).state}
                         for c in await self.store.campaigns.children(sweep_id)]
        return out

    async def plot(self, sweep_id: int) -> bytes | None:
        """The sweep's PNG (e.g. TGS against batch size), or None when its kind has none."""
        sweep = await self.store.sweeps.get(sweep_id)
        draw = kind_of(sweep.kind).plot
        if draw is None:
            return None
        return draw(sweep, await self.store.runs.of_sweep(sweep_id),
                    await self.store.jobs.of_sweep(sweep_id))

    async def progress(self, sweep_id: int, after: int = 0,
                       wait_s: float = 0.0) -> list[Event]:
        """Progress lines after event `after`; waits up to `wait_s` for the next one."""
        await self.store.sweeps.get(sweep_id)  # NotFound for an unknown id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            news = self.engine.news()
            # The store reads committed rows only (a read waits for another task's open
            # transaction): a line a rollback takes back, whose id the next line reuses, is
            # never shown to a watcher that would resume after it.
            events = await self.store.events.of_sweep(sweep_id, after, kind="progress")
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(news.wait(), min(remaining, 1.0))

    async def resume(self, sweep_id: int, exclude: Sequence[str] = (),
                     readmit: Sequence[str] = ()) -> dict[str, Any]:
        sweep = await self.store.sweeps.get(sweep_id)
        checks: list[Check] = []
        if sweep.state == SweepState.AWAITING_DECISION:
            # The pre-flight again (xla-tuning.SKILL.md Step 1): the stop may have lasted
            # hours, and what it checks (train_env.sh, the nodes, other users' jobs) may
            # have changed meanwhile. A failed check refuses the resume; nothing recorded.
            checks = await self.admission.preflight(self.engine.spec_of(sweep),
                                           await self.store.runs.of_sweep(sweep_id))
        await resume(self.engine, sweep_id, exclude, readmit)
        for check in checks:
            await self.store.events.add(sweep_id, "decision", f"on resume: {check.text}",
                                              rule=check.rule, evidence=check.evidence)
        out = await self.summary(sweep_id)
        out["excluded"] = [e.node for e in await self.store.exclusions.of_sweep(sweep_id)]
        return out

    async def current_stop(self, sweep_id: int) -> int | None:
        """The event id of the stop message a sweep awaiting a decision is waiting on."""
        if (await self.store.sweeps.get(sweep_id)).state != SweepState.AWAITING_DECISION:
            return None
        transitions = await self.store.events.of_sweep(sweep_id, kind="transition")
        stopped = [e.id for e in transitions if e.to_state == SweepState.AWAITING_DECISION]
        progress = await self.store.events.of_sweep(sweep_id, stopped[-1] if stopped else 0,
                                                  "progress")
        return progress[0].id if progress else None

    async def abort(self, sweep_id: int) -> dict[str, Any]:
        await abort(self.engine, sweep_id, "aborted by a person")
        await self._abort_stages(sweep_id)
        return await self.summary(sweep_id)

    async def _abort_stages(self, campaign_id: int) -> None:
        """A campaign's stage still under way ends with it: nobody would follow its result."""
        for link in await self.store.campaigns.children(campaign_id):
            if (await self.store.sweeps.get(link.child_id)).state in (
                    SweepState.QUEUED, SweepState.RUNNING, SweepState.AWAITING_DECISION):
                await abort(self.engine, link.child_id,
                            f"its campaign (sweep {campaign_id}) was aborted by a person")

    async def cancel(self, sweep_id: int) -> dict[str, Any]:
        # Say what was cancelled: a sweep awaiting a decision has no job running.
        jobs = await self.store.jobs.of_sweep(sweep_id)
        active = [j.backend_id or f"sweepd job {j.id}" for j in jobs if j.state in JOB_ACTIVE]
        what = f"job(s) {', '.join(active)} cancelled" if active else "no job was running"
        await abort(self.engine, sweep_id, f"cancelled by a person: {what}")
        await self._abort_stages(sweep_id)
        return await self.summary(sweep_id)

    # -- the CLI's read-only views (list filters, validate, models; `status`: self.health) --

    async def find_sweeps(self, states: Sequence[str] = (), kinds: Sequence[str] = (),
                          since: str | None = None, user: str | None = None
                          ) -> list[dict[str, Any]]:
        """Summaries of the sweeps matching every filter given, newest first."""
        found = await self.store.sweeps.find(states, kinds, since, user)
        return [await self.summary(s.id) for s in found]

    async def validate(self, data: Any) -> dict[str, Any]:
        """What a submit would do, without recording anything: the spec checked against
        this cluster, and the kind's first plan on an empty run list."""
        spec = self.admission.parse(data, self.toolkit_repo(), self.allowed_chats)
        return await dry_run(self.engine, self.admission, spec)

    def toolkit_repo(self) -> Path | None:
        """The repo whose configs/<model>.gpu.yml define models (submit.sh mode), else None."""
        slurm = self.engine.config.cluster.slurm
        return slurm.repo if self.engine.config.cluster.backend == "slurm" \
            and slurm.mode == "submit_sh" else None

    def models(self) -> dict[str, Any]:
        """The model shapes sweepd knows, and in submit.sh mode the repo's model configs."""
        repo = self.toolkit_repo()
        configs: list[str] | None = None
        if repo is not None:
            configs = sorted(p.name for p in (repo / "configs").glob("*.gpu.yml"))
        return {"models": [asdict(m) for m in MODELS.values()], "configs": configs}
