"""`sweepd top`: a live terminal view of the daemon's sweeps, built on textual.

It reads the socket API only (no second source of truth): the sweep list, each sweep's
`show`, and the progress long-poll, which wakes a sweep's row as soon as an event lands.
A slow re-list finds sweeps submitted meanwhile. Keys open explain / report, and resume
or abort the selected sweep after a confirmation.

This module is the app: the layout, the followers and the keys. The socket client is
`top_api`, what a sweep's JSON says is `top_fields`, the rows and screens `top_widgets`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Header, Label, ListView, Static

from sweepd.cli.top_api import LONG_POLL_S, Api, ApiError
from sweepd.cli.top_fields import STOPPED, cell, progress_text, stop_message
from sweepd.cli.top_widgets import Confirm, SweepChanged, SweepRow, TextScreen
from sweepd.util.text import escape

LIST_EVERY_S = 5.0        # re-list to find sweeps submitted since
MAX_SWEEPS = 50           # newest first; older ones are for `sweepd list`
RUN_COLUMNS = (("seq", "#"), ("label", "RUN"), ("state", "STATE"), ("outcome", "OUTCOME"),
               ("tgs", "TGS"), ("mfu", "MFU"), ("failure_class", "FAILURE"))
JOB_COLUMNS = (("id", "JOB"), ("run_seq", "RUN #"), ("attempt", "TRY"),
               ("backend_id", "SLURM ID"), ("state", "STATE"), ("failure_class", "FAILURE"),
               ("nodes", "NODES"))


class TopApp(App[None]):
    """The dashboard: sweeps above; the selected sweep's stop message, runs and jobs below."""

    TITLE = "sweepd top"
    # Under NARROW columns each sweep takes two lines, its latest line the whole second.
    NARROW = 120
    CSS = """
    #sweeps { height: 2fr; border: solid $accent; }
    .row { height: 1; layout: grid; grid-size: 4 1; grid-columns: 44 24 22 1fr; }
    .what { padding-right: 1; }
    .bar Bar { width: 1fr; }
    .tgs { margin: 0 1; }
    .-narrow .row { height: 2; grid-size: 3 2; grid-columns: 44 1fr 1fr; }
    .-narrow .latest { column-span: 3; }
    #detail { height: 3fr; }
    #title { text-style: bold; }
    #stop { color: $warning; }
    #tables { height: 1fr; }
    #runs { width: 1fr; }
    #jobs { width: 1fr; }
    #status { color: $error; }
    Confirm { align: center middle; }
    #confirm { width: 70; max-width: 100%; height: auto; max-height: 100%;
               border: thick $error; padding: 1 2; background: $surface; }
    #question-scroll { height: auto; max-height: 60vh; }
    #question { width: 100%; }
    #answers { height: auto; }
    TextScreen { align: center middle; }
    #text { width: 90%; height: 90%; border: thick $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "explain", "explain"), Binding("r", "report", "report"),
        Binding("u", "resume", "resume"), Binding("a", "abort", "abort"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, socket_path: Path, list_every_s: float = LIST_EVERY_S,
                 long_poll_s: float = LONG_POLL_S) -> None:
        super().__init__()
        # Textual types it as an instance variable (each screen reads the app's).
        self.HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (self.NARROW, "-wide")]
        self.api = Api(socket_path)
        self.list_every_s = list_every_s
        self.long_poll_s = long_poll_s
        self._followers: dict[int, asyncio.Task[None]] = {}
        self._rows_lock = asyncio.Lock()   # a row is inserted once, by one refresh

    def compose(self) -> ComposeResult:
        yield Header()
        yield ListView(id="sweeps")
        with Vertical(id="detail"):
            yield Label(id="title")
            yield Static(id="stop")
            with Horizontal(id="tables"):
                yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
                yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
            yield Label(id="status")
        yield Footer()

    def on_mount(self) -> None:
        for selector, columns in (("#runs", RUN_COLUMNS), ("#jobs", JOB_COLUMNS)):
            table = self.query_one(selector, DataTable)
            for key, header in columns:
                table.add_column(header, key=key)
        self.relist()

    async def on_unmount(self) -> None:
        for task in self._followers.values():
            task.cancel()
        await asyncio.gather(*self._followers.values(), return_exceptions=True)
        await self.api.close()

    # -- reading ---------------------------------------------------------------------

    @work(exclusive=True, group="list")
    async def relist(self) -> None:
        """The sweep list now and every few seconds; one long-poll follower per sweep that
        can still move."""
        while True:
            try:
                await self._relist_once()
                self._status("")
            except ApiError as e:
                self._status(str(e))
            await asyncio.sleep(self.list_every_s)

    async def _relist_once(self) -> None:
        listed = sorted(await self.api.sweeps(), key=lambda s: -int(s["id"]))[:MAX_SWEEPS]
        view = self.query_one("#sweeps", ListView)
        known = {row.sweep_id: row for row in view.query(SweepRow)}
        for summary in listed:
            sweep_id = int(summary["id"])
            row = known.get(sweep_id)
            changed = row is None or row.sweep.get("updated_at") != summary.get("updated_at") \
                or row.sweep.get("state") != summary.get("state")
            if changed:
                await self._refresh(sweep_id)
            if summary["state"] not in STOPPED and sweep_id not in self._followers:
                self._followers[sweep_id] = asyncio.create_task(self._follow(sweep_id))

    async def _follow(self, sweep_id: int) -> None:
        """Long-poll the sweep's progress; each batch of events refreshes its row."""
        after = 0
        while True:
            try:
                got = await self.api.progress(sweep_id, after, self.long_poll_s)
            except ApiError:
                await asyncio.sleep(self.list_every_s)
                continue
            if got["events"]:
                after = int(got["last"])
                self.post_message(SweepChanged(sweep_id))

    @on(SweepChanged)
    async def changed(self, message: SweepChanged) -> None:
        try:
            await self._refresh(message.sweep_id)
        except ApiError as e:
            self._status(str(e))

    async def _refresh(self, sweep_id: int) -> None:
        async with self._rows_lock:
            await self._refresh_row(await self.api.show(sweep_id))

    async def _refresh_row(self, sweep: dict[str, Any]) -> None:
        sweep_id = int(sweep["id"])
        view = self.query_one("#sweeps", ListView)
        rows = {row.sweep_id: row for row in view.query(SweepRow)}
        if sweep_id in rows:
            rows[sweep_id].show(sweep)
        else:
            newer = [i for i, row in enumerate(view.query(SweepRow)) if row.sweep_id > sweep_id]
            await view.insert(len(newer), [SweepRow(sweep)])
            if view.index is None:
                view.index = 0
        if self.selected_id() == sweep_id:
            self._show_detail(sweep)
        if sweep["state"] in STOPPED and sweep_id in self._followers:
            self._followers.pop(sweep_id).cancel()

    # -- the selected sweep ------------------------------------------------------------

    def selected(self) -> SweepRow | None:
        item = self.query_one("#sweeps", ListView).highlighted_child
        return item if isinstance(item, SweepRow) else None

    def selected_id(self) -> int | None:
        row = self.selected()
        return row.sweep_id if row else None

    @on(ListView.Highlighted, "#sweeps")
    def highlighted(self, event: ListView.Highlighted) -> None:
        if isinstance(event.item, SweepRow):
            self._show_detail(event.item.sweep)

    def _show_detail(self, sweep: Mapping[str, Any]) -> None:
        line = progress_text(sweep)
        self.query_one("#title", Label).update(Text(
            f"sweep {sweep['id']}: {escape(sweep['name'])} ({sweep['state']})"
            + (f" · {line}" if line else "")))
        self.query_one("#stop", Static).update(Text(stop_message(sweep)))
        runs = sweep.get("run_list") or []
        # Jobs name their run by the runs table's `#`, as `sweepd show` does.
        seq_of = {r.get("id"): r.get("seq") for r in runs}
        jobs = [{**j, "run_seq": seq_of.get(j.get("run_id"), j.get("run_id"))}
                for j in sweep.get("jobs") or []]
        for selector, rows, columns in (("#runs", runs, RUN_COLUMNS),
                                        ("#jobs", jobs, JOB_COLUMNS)):
            table = self.query_one(selector, DataTable)
            table.clear()
            for item in rows:
                # Text, not str: a DataTable reads a str cell as markup.
                table.add_row(*(Text(cell(item.get(key))) for key, _ in columns))

    def _status(self, text: str) -> None:
        with contextlib.suppress(NoMatches):   # the view is closing: nobody to tell
            self.query_one("#status", Label).update(Text(text))

    # -- keys --------------------------------------------------------------------------

    @work(group="open")
    async def action_explain(self) -> None:
        sweep_id = self.selected_id()
        if sweep_id is not None:
            lines = await self._try(self.api.explain(sweep_id))
            if lines is not None:
                body = "\n".join(escape(line) for line in lines) or "no events"
                await self.push_screen(TextScreen(f"explain {sweep_id}", body, markdown=False))

    @work(group="open")
    async def action_report(self) -> None:
        sweep_id = self.selected_id()
        if sweep_id is not None:
            markdown = await self._try(self.api.report(sweep_id))
            if markdown is not None:
                await self.push_screen(TextScreen(f"report {sweep_id}", markdown, markdown=True))

    @work(group="act")
    async def action_resume(self) -> None:
        await self._act("resume", "Resume sweep {id}? ({stop})")

    @work(group="act")
    async def action_abort(self) -> None:
        await self._act("abort", "Abort sweep {id}? Its running jobs are cancelled.")

    async def _act(self, verb: str, question: str) -> None:
        row = self.selected()
        if row is None:
            return
        text = question.format(id=row.sweep_id, stop=stop_message(row.sweep) or row.sweep["state"])
        if not await self.push_screen_wait(Confirm(text)):
            return
        done = await self._try(self.api.act(row.sweep_id, verb))
        if done is not None:
            self._status("")
            # The daemon may go between the two calls: say so, never leave the view.
            await self._try(self._refresh(row.sweep_id))
            if done["state"] not in STOPPED and row.sweep_id not in self._followers:
                self._followers[row.sweep_id] = asyncio.create_task(self._follow(row.sweep_id))

    async def _try(self, call: Any) -> Any:
        """The call's result, or None with the daemon's refusal shown in the status line."""
        try:
            return await call
        except ApiError as e:
            self._status(str(e))
            return None


def run_top(socket_path: Path) -> int:
    """Runs until q; the caller checked that the daemon answers."""
    with contextlib.suppress(KeyboardInterrupt):
        TopApp(socket_path).run()
    return 0
