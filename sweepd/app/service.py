"""The operations the socket API, the CLI and the chat offer, over the store and engine."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sweepd.app import slot
from sweepd.app.progress import most_node_runs, most_runs, slurm_seconds, sweep_progress
from sweepd.app.queries import Queries
from sweepd.clusters.base import NOT_IN_CLUSTER, ControllerUnreachable, SubmitRefused
from sweepd.core.control import abort, resume
from sweepd.core.engine import Engine
from sweepd.core.states import JOB_ACTIVE, SweepState
from sweepd.core.submit import job_request
from sweepd.kinds.api import Finished, GatherError, Plan, StartSweep, Stop, SweepContext
from sweepd.kinds.registry import (
    Check,
    PreflightContext,
    gather_context,
    kind_of,
    parse_spec,
)
from sweepd.kinds.spec import SpecError, SweepSpec
from sweepd.notify.chats import refuse_unknown_chats
from sweepd.store.outbox import Outbox
from sweepd.store.rows import Event, Run
from sweepd.util.hostlists import collect_nodes
from sweepd.util.model_shapes import MODELS
from sweepd.util.text import compact_nodes


class Service(Queries):
    # The chats a spec may name (the daemon sets them from its Telegram settings); None:
    # this process sends to no chat, nothing to check.
    allowed_chats: frozenset[int] | None = None
    # False until the daemon's first (recovery) pass has ended: the socket answers during it,
    # and /health says which (a client that needs the recovered state waits for True).
    recovered: bool = False

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.store)   # report, explain, job_log: read-only, store alone
        self.engine = engine
        self.started_at = time.time()
        self.last_pass_at: float | None = None

    async def submit(self, data: Any, submitted_by: str | None = None) -> dict[str, Any]:
        spec = parse_spec(data, self.toolkit_repo())  # SpecError with field-level errors
        self._refuse_misfits(spec)
        refuse_unknown_chats(spec.chats, self.allowed_chats)
        # A slot (partition + node_count) becomes named idle nodes now, frozen in the spec.
        spec, chosen = await self._resolve_slot(spec)
        # What the spec refers to (an earlier sweep, a commit) must hold now, not fail the
        # sweep a moment after it was accepted.
        facts = await self._gather(spec)
        await self._refuse_strangers(spec.node_list)
        checks = await self._preflight(spec)
        name = spec.name or spec.default_name()
        sweep_id = await self.store.create_sweep(spec.kind, name, spec.model_dump(mode="json"),
                                                 submitted_by)
        # Its first plan takes these facts instead of gathering them again.
        self.engine.gathered.keep(sweep_id, facts, self.engine.clock.now())
        if chosen is not None:
            await self.store.add_event(sweep_id, "decision", chosen.text, rule=slot.RULE,
                                       evidence=chosen.evidence)
        for check in checks:
            await self.store.add_event(sweep_id, "decision", check.text, rule=check.rule,
                                       evidence=check.evidence)
        self.engine.wake()   # started and planned now, not at the next tick
        self.engine.notify()
        return await self.summary(sweep_id)

    def _refuse_misfits(self, spec: SweepSpec) -> None:
        """What the spec cannot see alone: does it fit this cluster's nodes (e.g. a TP
        degree against `cluster.gpus_per_node`)? One line if not."""
        problem = spec.cluster_problem(self.engine.config.cluster.gpus_per_node)
        if problem is not None:
            raise SpecError(problem, [{"loc": [], "msg": problem}])

    def _default_partition(self) -> str | None:
        """The configured Slurm partition a spec without one uses (None off Slurm)."""
        cluster = self.engine.config.cluster
        return cluster.slurm.partition if cluster.backend == "slurm" else None

    async def _resolve_slot(self, spec: SweepSpec) -> tuple[SweepSpec, slot.Chosen | None]:
        return await slot.resolve(self.engine.backend, spec, self._default_partition())

    async def _preflight(self, spec: SweepSpec, resumed: Sequence[Run] | None = None
                         ) -> list[Check]:
        """The kind's checks at submission and at a resume (`resumed`: the sweep's runs); a
        failed one refuses it, nothing recorded."""
        hook = kind_of(spec.kind).preflight
        if hook is None:
            return []
        partition = getattr(spec, "partition", None) or self._default_partition()
        checks: list[Check] = await hook(spec, PreflightContext(
            self.engine.backend, gather_context(self.engine.config), partition, resumed))
        failed = [c for c in checks if not c.ok]
        if failed:
            what = "pre-flight: " + "; ".join(c.text for c in failed)
            raise SpecError(what, [{"loc": [c.rule], "msg": c.text} for c in failed])
        return checks

    async def _gather(self, spec: SweepSpec) -> Any:
        """What the spec refers to must hold now (a refusal), not fail the sweep later."""
        try:
            return await kind_of(spec.kind).gather(self.store, spec,
                                                    gather_context(self.engine.config))
        except GatherError as e:
            raise SpecError(str(e)) from None

    async def _refuse_strangers(self, nodes: list[str]) -> None:
        """A node name the cluster does not know (a typo) would stop the sweep at its first
        job; say so now. A scheduler that does not answer is no reason to refuse: the sweep
        waits for it as it would later."""
        try:
            states = await self.engine.backend.node_states(nodes)
        except (ControllerUnreachable, RuntimeError):
            return
        strangers = [n for n in nodes if states.get(n) == NOT_IN_CLUSTER]
        if strangers:   # one compact line, however many: a typo may name thousands
            what = f"not nodes of this cluster: {compact_nodes(strangers)}"
            raise SpecError(what, [{"loc": ["nodes"], "msg": what}])

    async def summary(self, sweep_id: int) -> dict[str, Any]:
        s = await self.store.sweep(sweep_id)
        runs = await self.store.runs(sweep_id)
        # Updated = the latest thing that happened to it (a job, a run), not only its state.
        updated = max(s.updated_at, await self.store.last_event_at(sweep_id) or "")
        link = await self.store.campaign_of(sweep_id)   # a campaign's stage: its campaign
        return {"id": s.id, "kind": s.kind, "name": s.name, "state": s.state,
                "reason": s.reason, "created_at": s.created_at, "updated_at": updated,
                "runs": len(runs), "verdict": s.verdict, "submitted_by": s.submitted_by,
                "campaign": {"id": link.campaign_id, "stage": link.stage} if link else None,
                "progress": sweep_progress(s, runs, await self.store.jobs(sweep_id))}

    async def list_sweeps(self) -> list[dict[str, Any]]:
        return [await self.summary(s.id) for s in await self.store.sweeps()]

    async def show(self, sweep_id: int) -> dict[str, Any]:
        out = await self.summary(sweep_id)
        out["spec"] = (await self.store.sweep(sweep_id)).spec
        # Each run's params typed (as `RunParams` holds them), beside the row's stored JSON.
        out["run_list"] = [{**r.as_dict(), "params": r.params.model_dump(mode="json")}
                           for r in await self.store.runs(sweep_id)]
        out["jobs"] = [j.as_dict() for j in await self.store.jobs(sweep_id)]
        out["exclusions"] = [e.as_dict() for e in await self.store.exclusions(sweep_id, False)]
        out["events"] = [e.as_dict() for e in await self.store.events(sweep_id)]
        # A campaign's stages: each a sweep of its own, in the order they started.
        out["stages"] = [{"stage": c.stage, "sweep": c.child_id,
                          "state": (await self.store.sweep(c.child_id)).state}
                         for c in await self.store.campaign_children(sweep_id)]
        return out

    async def plot(self, sweep_id: int) -> bytes | None:
        """The sweep's PNG (e.g. TGS against batch size), or None when its kind has none."""
        sweep = await self.store.sweep(sweep_id)
        draw = kind_of(sweep.kind).plot
        if draw is None:
            return None
        return draw(sweep, await self.store.runs(sweep_id), await self.store.jobs(sweep_id))

    async def progress(self, sweep_id: int, after: int = 0,
                       wait_s: float = 0.0) -> list[Event]:
        """Progress lines after event `after`; waits up to `wait_s` for the next one."""
        await self.store.sweep(sweep_id)  # NotFound for an unknown id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            news = self.engine.news()
            # The store reads committed rows only (a read waits for another task's open
            # transaction): a line a rollback takes back, whose id the next line reuses, is
            # never shown to a watcher that would resume after it.
            events = await self.store.events(sweep_id, after, kind="progress")
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(news.wait(), min(remaining, 1.0))

    async def resume(self, sweep_id: int, exclude: Sequence[str] = (),
                     readmit: Sequence[str] = ()) -> dict[str, Any]:
        sweep = await self.store.sweep(sweep_id)
        checks: list[Check] = []
        if sweep.state == SweepState.AWAITING_DECISION:
            # The pre-flight again (xla-tuning.SKILL.md Step 1): the stop may have lasted
            # hours, and what it checks (train_env.sh, the nodes, other users' jobs) may
            # have changed meanwhile. A failed check refuses the resume; nothing recorded.
            checks = await self._preflight(self.engine.spec_of(sweep),
                                           await self.store.runs(sweep_id))
        await resume(self.engine, sweep_id, exclude, readmit)
        for check in checks:
            await self.store.add_event(sweep_id, "decision", f"on resume: {check.text}",
                                       rule=check.rule, evidence=check.evidence)
        out = await self.summary(sweep_id)
        out["excluded"] = [e.node for e in await self.store.exclusions(sweep_id)]
        return out

    async def current_stop(self, sweep_id: int) -> int | None:
        """The event id of the stop message a sweep awaiting a decision is waiting on."""
        if (await self.store.sweep(sweep_id)).state != SweepState.AWAITING_DECISION:
            return None
        transitions = await self.store.events(sweep_id, kind="transition")
        stopped = [e.id for e in transitions if e.to_state == SweepState.AWAITING_DECISION]
        progress = await self.store.events(sweep_id, stopped[-1] if stopped else 0, "progress")
        return progress[0].id if progress else None

    async def abort(self, sweep_id: int) -> dict[str, Any]:
        await abort(self.engine, sweep_id, "aborted by a person")
        await self._abort_stages(sweep_id)
        return await self.summary(sweep_id)

    async def _abort_stages(self, campaign_id: int) -> None:
        """A campaign's stage still under way ends with it: nobody would follow its result."""
        for link in await self.store.campaign_children(campaign_id):
            if (await self.store.sweep(link.child_id)).state in (
                    SweepState.QUEUED, SweepState.RUNNING, SweepState.AWAITING_DECISION):
                await abort(self.engine, link.child_id,
                            f"its campaign (sweep {campaign_id}) was aborted by a person")

    async def cancel(self, sweep_id: int) -> dict[str, Any]:
        # Say what was cancelled: a sweep awaiting a decision has no job running.
        active = [j.backend_id or f"sweepd job {j.id}" for j in await self.store.jobs(sweep_id)
                  if j.state in JOB_ACTIVE]
        what = f"job(s) {', '.join(active)} cancelled" if active else "no job was running"
        await abort(self.engine, sweep_id, f"cancelled by a person: {what}")
        await self._abort_stages(sweep_id)
        return await self.summary(sweep_id)

    # -- the CLI's read-only views (list filters, status, validate, models) -----------------

    async def find_sweeps(self, states: Sequence[str] = (), kinds: Sequence[str] = (),
                          since: str | None = None, user: str | None = None
                          ) -> list[dict[str, Any]]:
        """Summaries of the sweeps matching every filter given, newest first."""
        found = await self.store.find_sweeps(states, kinds, since, user)
        return [await self.summary(s.id) for s in found]

    def engine_pass(self) -> None:
        """Called after each engine pass (the daemon's loop): `status` shows the last."""
        self.last_pass_at = time.time()

    async def status(self) -> dict[str, Any]:
        config = self.engine.config
        reachable, why = await self._backend_reachable()
        return {
            "version": version(), "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 1),
            "backend": config.cluster.backend, "backend_reachable": reachable,
            "backend_problem": why,
            "sweeps": await self.store.count_by_state("sweeps"),
            "jobs": await self.store.count_by_state("jobs"),
            "telegram": config.telegram.enabled,
            "delivery_backlog": len(await Outbox(self.store).pending(limit=10_000)),
            "last_pass_at": self.last_pass_at,
            "last_pass_ago_s": (None if self.last_pass_at is None
                                else round(time.time() - self.last_pass_at, 1)),
        }

    async def _backend_reachable(self) -> tuple[bool, str | None]:
        """Ask the scheduler about one (made-up) node: any answer means it is reachable."""
        try:
            await asyncio.wait_for(self.engine.backend.node_states(["sweepd-status-probe"]),
                                   PROBE_TIMEOUT_S)
        except (ControllerUnreachable, TimeoutError) as e:
            return False, str(e) or f"no answer within {PROBE_TIMEOUT_S:g}s"
        except (RuntimeError, OSError) as e:
            return True, f"answered with an error: {e}"
        return True, None

    async def validate(self, data: Any) -> dict[str, Any]:
        """What a submit would do, without recording anything: the spec checked against
        this cluster, and the kind's first plan on an empty run list."""
        spec = parse_spec(data, self.toolkit_repo())
        self._refuse_misfits(spec)
        refuse_unknown_chats(spec.chats, self.allowed_chats)
        spec, _ = await self._resolve_slot(spec)   # shown, not recorded
        kind = kind_of(spec.kind)
        facts = await self._gather(spec)
        await self._refuse_strangers(spec.node_list)
        states = await self._node_states(spec.node_list)
        checks = await self._preflight(spec)
        config = self.engine.config
        ctx = SweepContext(runs=[], nodes=spec.node_list,
                           gpu_memory_gib=config.cluster.gpu_memory_gib, facts=facts,
                           gpus_per_node=config.cluster.gpus_per_node)
        first = kind.plan(spec, ctx)
        dumped = spec.model_dump(mode="json")
        return {"kind": spec.kind, "name": spec.name or spec.default_name(),
                "nodes": spec.nodes, "node_count": len(spec.node_list),
                "backend": config.cluster.backend, "node_states": states,
                "first_plan": plan_dict(first), "preflight": [asdict(c) for c in checks],
                "job_names": await self._job_names(spec, first),
                **await self._bounds(spec.kind, spec.model, dumped)}

    async def _job_names(self, spec: SweepSpec, plan: Plan) -> list[dict[str, Any]]:
        """Each first job's name as the backend would build it, and the overrides it would
        carry outside the name; a submission the backend would refuse (a name over the
        toolkit's limit even so, a profile that cannot take effect) refuses the spec now."""
        backend = getattr(self.engine.backend, "inner", self.engine.backend)
        name_of = getattr(backend, "name_of", None)
        if name_of is None or isinstance(plan, (Finished, Stop, StartSweep)):
            return []
        out = []
        for run in plan:
            request = job_request(spec, run.params, token=SAMPLE_TOKEN, nodes=list(run.nodes),
                                  output_dir=self.engine.outputs / "validate")
            try:
                fitted = await asyncio.to_thread(name_of, request)
            except SubmitRefused as e:
                what = f"{run.label}: submission would be refused: {e}"
                raise SpecError(what, [{"loc": [], "msg": what}]) from None
            out.append({"label": run.label, "name": fitted.name,
                        "bytes": len(fitted.name.encode()), "carried": list(fitted.carried)})
        return out

    async def _node_states(self, nodes: list[str]) -> dict[str, list[str]]:
        """State -> the pinned nodes in it, as the scheduler says now ({} if it is down)."""
        try:
            states = await self.engine.backend.node_states(nodes)
        except (ControllerUnreachable, RuntimeError):
            return {}
        by_state: dict[str, list[str]] = {}
        for node in nodes:
            by_state.setdefault(states.get(node, "unknown"), []).append(node)
        return by_state

    async def _bounds(self, kind: str, model: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The most runs, jobs (every retry taken) and node-hours a sweep may take."""
        retries = self.engine.config.policy.max_retries
        most = most_runs(kind, spec)
        node_runs = most_node_runs(kind, spec)
        limit = self.engine.config.cluster.slurm.time_limit
        job_s = slurm_seconds(limit) if limit and self.engine.config.cluster.backend == \
            "slurm" else None
        basis = f"the configured time limit {limit} per job" if job_s else None
        if job_s is None:
            past = await self.store.job_seconds_of(kind, model)
            if past:
                job_s = sum(past) / len(past)
                basis = (f"a guess: {len(past)} earlier {kind} job(s) of {model} took "
                         f"{job_s / 3600:.2f} h (cluster time) on average")
        hours = (None if job_s is None or node_runs is None
                 else round(node_runs * (1 + retries) * job_s / 3600, 2))
        return {"most_runs": most, "most_jobs": None if most is None else most * (1 + retries),
                "max_retries": retries, "most_node_runs": node_runs, "most_node_hours": hours,
                "node_hours_basis": basis or "unknown: no time limit configured and no "
                                             "earlier job of this kind and model"}

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


PROBE_TIMEOUT_S = 10.0
# A token shaped like the engine's (`sw<sweep>-<8 hex>.<store id>`): `validate` names jobs
# with it, as long as a real one, so the name's length is the real name's.
SAMPLE_TOKEN = "sw1-00000000.000000"


def version() -> str:
    try:
        return importlib.metadata.version("sweepd")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def plan_dict(plan: Plan) -> dict[str, Any]:
    if isinstance(plan, Finished):
        return {"finished": plan.summary, "ok": plan.ok}
    if isinstance(plan, Stop):
        return {"stop": plan.reason, "rule": plan.rule}
    if isinstance(plan, StartSweep):
        return {"stage": plan.stage, "sweep": plan.spec}
    return {"runs": [{"label": r.label,
                      "params": r.params.model_dump(mode="json", exclude_defaults=True),
                      "nodes": collect_nodes(list(r.nodes)), "node_count": len(r.nodes),
                      "reason": r.reason, "rule": r.rule}
                     for r in plan]}
