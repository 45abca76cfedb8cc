"""Read-only operations over a store alone: what the daemon serves and what `--state-dir`
reads directly from a `sweepd run`/`demo` state directory without a daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NamedTuple

from sweepd.app.joblog import NoSuchJob, pick_job, read_log
from sweepd.app.progress import sweep_progress
from sweepd.kinds.registry import kind_of, kinds
from sweepd.reports.plots import as_svg
from sweepd.reports.report import explain_lines, report_json, report_markdown
from sweepd.store.rows import Job, Run, Sweep
from sweepd.store.store import NotFound, Store

# The notes of what a sweep's submissions left in, or removed from, the person's files
# (core/control.end_note), in the order they are told.
LEFTOVER_RULES = ("cluster.leftover_removed", "cluster.leftover", "cluster.leftover_kept")


class _Rows(NamedTuple):
    sweep: Sweep
    runs: list[Run]
    jobs: list[Job]
    excluded: list[str]
    stage_jobs: list[Job]


class Queries:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def _rows(self, sweep_id: int) -> _Rows:
        """What a report is built from: the sweep, its runs and jobs, its excluded nodes and
        a campaign's stage sweeps' jobs (the report and the HTML page read the same)."""
        sweep = await self.store.sweeps.get(sweep_id)
        excl = [e.node for e in await self.store.exclusions.of_sweep(sweep_id)]
        stage_jobs = [j for c in await self.store.campaigns.children(sweep_id)
                      for j in await self.store.jobs.of_sweep(c.child_id)]
        return _Rows(sweep, await self.store.runs.of_sweep(sweep_id),
                     await self.store.jobs.of_sweep(sweep_id), excl, stage_jobs)

    async def report(self, sweep_id: int) -> dict[str, Any]:
        sweep, runs, jobs, excl, stage_jobs = await self._rows(sweep_id)
        renderer = kind_of(sweep.kind).report   # the kind's table and rows
        data = report_json(renderer, sweep, runs, jobs, excl, stage_jobs)
        kind = kinds().get(sweep.kind)
        extras = kind.client.report_extras if kind is not None else None
        if extras is not None:   # what the kind's client action writes from (ClientHooks)
            data.update(extras(sweep, runs, jobs, self.toolkit_repo()))
        left = await self.leftovers(sweep_id)
        data["leftovers"] = left
        markdown = report_markdown(renderer, sweep, runs, jobs, excl, stage_jobs)
        return {"markdown": _with_leftovers(markdown, left), "json": data}

    async def leftovers(self, sweep_id: int) -> list[str]:
        """What the sweep and a campaign's stages removed from, or left in, the person's
        files (e.g. TUNE_PROFILE arms in train_env.sh), as recorded at their last stop or
        end: one line each, the sweep named."""
        ids = [sweep_id, *[c.child_id for c in await self.store.campaigns.children(sweep_id)]]
        out: list[str] = []
        for sid in ids:
            said: dict[str, str] = {}
            for e in await self.store.events.of_sweep(sid, kind="note"):
                if e.rule in LEFTOVER_RULES:
                    said[e.rule] = e.evidence or e.reason   # the latest of each
            out += [f"sweep {sid}: {line.strip()}" for rule in LEFTOVER_RULES
                    if rule in said for line in said[rule].splitlines()
                    if line.strip() and not line.startswith("  remove them")]
        return out

    def toolkit_repo(self) -> Path | None:
        """The submit.sh checkout (a daemon's config knows it; a state directory does not)."""
        return None

    async def page(self, sweep_id: int) -> dict[str, Any]:
        """What the HTML page of a sweep is rendered from (`sweepd/web/page.py`): the
        report (its Markdown and JSON, without the kind's client extras), the `explain`
        lines, where it is (progress) and the kind's chart as inline SVG (None: its kind
        draws none yet). The same structures the report and `explain` print: the page is
        another rendering of them, not a copy. The rows are read here; what is built from
        them (tens of milliseconds with the chart) is built in a thread, off the loop the
        engine's pass runs on."""
        sweep, runs, jobs, excl, stage_jobs = await self._rows(sweep_id)
        left = await self.leftovers(sweep_id)
        events = await self.store.events.of_sweep(sweep_id)
        kind = kind_of(sweep.kind)

        def build() -> dict[str, Any]:
            data = report_json(kind.report, sweep, runs, jobs, excl, stage_jobs)
            data["leftovers"] = left
            markdown = _with_leftovers(
                report_markdown(kind.report, sweep, runs, jobs, excl, stage_jobs), left)
            svg: str | None = None
            if kind.plot is not None:
                with as_svg():
                    image = kind.plot(sweep, runs, jobs)
                svg = image.decode("utf-8") if image is not None else None
            return {"report": {"markdown": markdown, "json": data},
                    "explain": explain_lines(events, {r.id: r.seq for r in runs}),
                    "progress": sweep_progress(sweep, runs, jobs), "plot_svg": svg}

        return await asyncio.to_thread(build)

    async def explain(self, sweep_id: int) -> dict[str, Any]:
        await self.store.sweeps.get(sweep_id)  # an unknown id is NotFound, as for every verb
        events = await self.store.events.of_sweep(sweep_id)
        run_seq = {r.id: r.seq for r in await self.store.runs.of_sweep(sweep_id)}
        return {"lines": explain_lines(events, run_seq),
                "events": [e.as_dict() for e in events if e.kind != "progress"]}

    async def job_log(self, sweep_id: int, which: str | None = None,
                      offset: int = 0) -> dict[str, Any]:
        """A chunk of the named job's log from `offset`, each line marked (joblog.mark)."""
        await self.store.sweeps.get(sweep_id)
        try:
            job = pick_job(await self.store.jobs.of_sweep(sweep_id),
                           await self.store.runs.of_sweep(sweep_id), which)
        except NoSuchJob as e:
            raise NotFound(f"sweep {sweep_id}: {e}") from None
        out = read_log(job, await self.store.jobs.signals(job.id), offset)
        out["run_seq"] = (await self.store.runs.get(job.run_id)).seq
        return out


def _with_leftovers(markdown: str, left: list[str]) -> str:
    """The report with what the sweep (or its stages) removed from, or left in, the
    person's files."""
    if not left:
        return markdown
    return markdown + "\n\n## In your files\n\n" + "\n".join(left) + "\n"
