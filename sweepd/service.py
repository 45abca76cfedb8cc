"""The operations the socket API, the CLI and the chat offer, over the store and engine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from sweepd.clusters.base import ControllerUnreachable
from sweepd.engine import Engine
from sweepd.reports.report import explain_lines, report_json, report_markdown
from sweepd.specs import SpecError, parse_spec
from sweepd.states import SweepState
from sweepd.store.rows import Event
from sweepd.strategies.registry import kind_of
from sweepd.sweeps import abort, resume
from sweepd.text import compact_nodes


class Service:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = engine.store

    async def submit(self, data: Any) -> dict[str, Any]:
        spec = parse_spec(data)  # raises SpecError with field-level errors
        # What the spec refers to (an earlier sweep, a commit) must hold now, not fail the
        # sweep a moment after it was accepted.
        facts = await kind_of(spec.kind).gather(self.store, spec)
        if "error" in facts:
            raise SpecError(str(facts["error"]))
        await self._refuse_strangers(spec.node_list)
        name = spec.name or spec.default_name()
        sweep_id = await self.store.create_sweep(spec.kind, name, spec.model_dump(mode="json"))
        self.engine.notify()
        return await self.summary(sweep_id)

    async def _refuse_strangers(self, nodes: list[str]) -> None:
        """A node name the cluster does not know (a typo) would stop the sweep at its first
        job; say so now. A scheduler that does not answer is no reason to refuse: the sweep
        waits for it as it would later."""
        try:
            states = await self.engine.backend.node_states(nodes)
        except (ControllerUnreachable, RuntimeError):
            return
        strangers = [n for n in nodes if states.get(n) == "unknown"]
        if strangers:   # one compact line, however many: a typo may name thousands
            what = f"not nodes of this cluster: {compact_nodes(strangers)}"
            raise SpecError(what, [{"loc": ["nodes"], "msg": what}])

    async def summary(self, sweep_id: int) -> dict[str, Any]:
        s = await self.store.sweep(sweep_id)
        runs = await self.store.runs(sweep_id)
        # Updated = the latest thing that happened to it (a job, a run), not only its state.
        updated = max(s.updated_at, await self.store.last_event_at(sweep_id) or "")
        return {"id": s.id, "kind": s.kind, "name": s.name, "state": s.state,
                "reason": s.reason, "created_at": s.created_at, "updated_at": updated,
                "runs": len(runs), "verdict": s.verdict}

    async def list_sweeps(self) -> list[dict[str, Any]]:
        return [await self.summary(s.id) for s in await self.store.sweeps()]

    async def show(self, sweep_id: int) -> dict[str, Any]:
        out = await self.summary(sweep_id)
        out["spec"] = (await self.store.sweep(sweep_id)).spec
        out["run_list"] = [r.as_dict() for r in await self.store.runs(sweep_id)]
        out["jobs"] = [j.as_dict() for j in await self.store.jobs(sweep_id)]
        out["exclusions"] = [e.as_dict() for e in await self.store.exclusions(sweep_id, False)]
        out["events"] = [e.as_dict() for e in await self.store.events(sweep_id)]
        return out

    async def report(self, sweep_id: int) -> dict[str, Any]:
        sweep = await self.store.sweep(sweep_id)
        runs = await self.store.runs(sweep_id)
        jobs = await self.store.jobs(sweep_id)
        excl = [e.node for e in await self.store.exclusions(sweep_id)]
        return {"markdown": report_markdown(sweep, runs, jobs, excl),
                "json": report_json(sweep, runs, jobs, excl)}

    async def plot(self, sweep_id: int) -> bytes | None:
        """The sweep's PNG (e.g. TGS against batch size), or None when its kind has none."""
        sweep = await self.store.sweep(sweep_id)
        draw = kind_of(sweep.kind).plot
        if draw is None:
            return None
        return draw(sweep, await self.store.runs(sweep_id), await self.store.jobs(sweep_id))

    async def explain(self, sweep_id: int) -> dict[str, Any]:
        await self.store.sweep(sweep_id)  # an unknown id is NotFound, as for every verb
        events = await self.store.events(sweep_id)
        run_seq = {r.id: r.seq for r in await self.store.runs(sweep_id)}
        return {"lines": explain_lines(events, run_seq),
                "events": [e.as_dict() for e in events if e.kind != "progress"]}

    async def progress(self, sweep_id: int, after: int = 0,
                       wait_s: float = 0.0) -> list[Event]:
        """Progress lines after event `after`; waits up to `wait_s` for the next one."""
        await self.store.sweep(sweep_id)  # NotFound for an unknown id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            news = self.engine.news()
            events = await self.store.events(sweep_id, after, kind="progress")
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(news.wait(), min(remaining, 1.0))

    async def resume(self, sweep_id: int, exclude: Sequence[str] = (),
                     readmit: Sequence[str] = ()) -> dict[str, Any]:
        await resume(self.engine, sweep_id, exclude, readmit)
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
        return await self.summary(sweep_id)

    async def cancel(self, sweep_id: int) -> dict[str, Any]:
        await abort(self.engine, sweep_id, "cancelled by a person: running jobs cancelled")
        return await self.summary(sweep_id)
