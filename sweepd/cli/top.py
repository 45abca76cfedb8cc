"""`sweepd top`: a live terminal view of the daemon's sweeps, built on textual.

It reads the socket API only (no second source of truth): the sweep list, each sweep's
`show`, and the progress long-poll, which wakes a sweep's row as soon as an event lands.
A slow re-list finds sweeps submitted meanwhile. Keys open explain / report, and resume
or abort the selected sweep after a confirmation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import httpx
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    DataTable,
    Footer,
    Header,
    Label,
    ListItem,
    ListView,
    Markdown,
    ProgressBar,
    Sparkline,
    Static,
)

from sweepd.cli.output import runs_cell
from sweepd.util.text import escape

LONG_POLL_S = 25.0        # one progress long-poll; the API caps it at 30 s
LIST_EVERY_S = 5.0        # re-list to find sweeps submitted since
MAX_SWEEPS = 50           # newest first; older ones are for `sweepd list`
FINISHED_RUNS = frozenset({"passed", "failed", "cancelled"})
STOPPED = frozenset({"done", "failed", "aborted", "awaiting_decision"})
RUN_COLUMNS = (("seq", "#"), ("label", "RUN"), ("state", "STATE"), ("outcome", "OUTCOME"),
               ("tgs", "TGS"), ("mfu", "MFU"), ("failure_class", "FAILURE"))
JOB_COLUMNS = (("id", "JOB"), ("run_seq", "RUN #"), ("attempt", "TRY"),
               ("backend_id", "SLURM ID"), ("state", "STATE"), ("failure_class", "FAILURE"),
               ("nodes", "NODES"))


class ApiError(Exception):
    """The daemon refused a request or could not be reached."""


class Api:
    """The few socket routes the view uses, asynchronously (it runs in textual's loop)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._http = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(socket_path)),
                                       base_url="http://sweepd", timeout=LONG_POLL_S + 30)

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            raise ApiError(f"sweepd is not reachable at {self.socket_path}: {e!r}") from None
        if response.status_code >= 400:
            try:
                message = str(response.json()["error"])
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {response.status_code}"
            raise ApiError(message)
        return response

    async def sweeps(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/sweeps")).json())

    async def show(self, sweep_id: int) -> dict[str, Any]:
        return dict((await self._call("GET", f"/sweeps/{sweep_id}")).json())

    async def progress(self, sweep_id: int, after: int, wait_s: float) -> dict[str, Any]:
        return dict((await self._call("GET", f"/sweeps/{sweep_id}/progress",
                                      params={"after": after, "wait": wait_s})).json())

    async def explain(self, sweep_id: int) -> list[str]:
        return list((await self._call("GET", f"/sweeps/{sweep_id}/explain")).json()["lines"])

    async def report(self, sweep_id: int) -> str:
        return (await self._call("GET", f"/sweeps/{sweep_id}/report.md")).text

    async def act(self, sweep_id: int, verb: str) -> dict[str, Any]:
        return dict((await self._call("POST", f"/sweeps/{sweep_id}/{verb}")).json())


# -- what a sweep's JSON says (the one place that reads its fields) ----------------------

def progress_of(sweep: Mapping[str, Any]) -> tuple[int, int | None]:
    """Runs finished, and the most runs the sweep may take (None: no fixed most). Reads
    the API's `progress` object (`runs_done`, `runs_most`) when the daemon sends one, else
    counts the runs itself (an older daemon)."""
    given = sweep.get("progress")
    if isinstance(given, Mapping) and isinstance(given.get("runs_done"), int):
        most = given.get("runs_most")
        return int(given["runs_done"]), int(most) if isinstance(most, int) else None
    runs = sweep.get("run_list") or []
    done = sum(1 for r in runs if r.get("state") in FINISHED_RUNS)
    spec = sweep.get("spec") or {}
    most = spec.get("max_runs")
    if isinstance(spec.get("values"), list) and isinstance(most, int):
        most = min(most, len(spec["values"]))   # explicit candidates: at most one run each
    if sweep.get("state") in STOPPED - {"awaiting_decision"}:
        most = done   # nothing more will run
    return done, int(most) if isinstance(most, int) else None


def progress_text(sweep: Mapping[str, Any]) -> str:
    """The daemon's one-line progress (runs, jobs in flight, elapsed, ETA), if it sends it."""
    given = sweep.get("progress")
    line = given.get("line") if isinstance(given, Mapping) else None
    return escape(str(line)) if line else ""


def tgs_series(sweep: Mapping[str, Any]) -> list[float]:
    """Each finished run's TGS, in run order: the sweep's sparkline."""
    runs = sorted(sweep.get("run_list") or [], key=lambda r: r.get("seq", 0))
    return [float(r["tgs"]) for r in runs if isinstance(r.get("tgs"), int | float)]


def latest_line(sweep: Mapping[str, Any]) -> str:
    """The newest progress line's first line (a stop message's headline)."""
    lines = [e["reason"] for e in sweep.get("events") or [] if e.get("kind") == "progress"]
    return escape(lines[-1].strip().splitlines()[0]) if lines and lines[-1].strip() else ""


def stop_message(sweep: Mapping[str, Any]) -> str:
    """For a sweep awaiting a decision, the message it stopped with (the progress line
    written with its last move to awaiting_decision); for an ended one, its reason; for
    one still going, nothing."""
    if sweep.get("state") not in STOPPED:
        return ""
    if sweep.get("state") != "awaiting_decision":
        return escape(sweep.get("reason") or "", keep_newlines=True)
    events = sweep.get("events") or []
    stops = [i for i, e in enumerate(events) if e.get("kind") == "transition"
             and e.get("to_state") == "awaiting_decision" and e.get("run_id") is None]
    after = events[stops[-1]:] if stops else events
    lines = [e["reason"] for e in after if e.get("kind") == "progress"]
    return escape(lines[0] if lines else sweep.get("reason") or "", keep_newlines=True)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return escape(str(value))


# -- widgets -----------------------------------------------------------------------------

class SweepRow(ListItem):
    """One sweep: id, state and kind; its progress bar; its TGS sparkline; its latest line."""

    def __init__(self, sweep: Mapping[str, Any]) -> None:
        super().__init__(id=f"sweep-{sweep['id']}")
        self.sweep_id = int(sweep["id"])
        self.sweep: Mapping[str, Any] = sweep

    def compose(self) -> ComposeResult:
        with Container(classes="row"):   # a grid: one line when wide, two when narrow
            yield Label(classes="what")
            yield ProgressBar(show_eta=False, classes="bar")
            yield Sparkline([], summary_function=max, classes="tgs")
            yield Label(classes="latest")

    def on_mount(self) -> None:
        self.show(self.sweep)

    def show(self, sweep: Mapping[str, Any]) -> None:
        self.sweep = sweep
        done, most = progress_of(sweep)
        what = f"{sweep['id']:>4} {sweep['state']:<17} {sweep['kind']:<11} "
        ended = bool((sweep.get("progress") or {}).get("ended")) or \
            sweep.get("state") in STOPPED - {"awaiting_decision"}
        self.query_one(".what", Label).update(Text(what + runs_cell(done, most, ended)))
        self.query_one(ProgressBar).update(total=most, progress=done)
        self.query_one(Sparkline).data = tgs_series(sweep)
        self.query_one(".latest", Label).update(Text(latest_line(sweep)))


class TextScreen(ModalScreen[None]):
    """Explain (plain lines) or a report (Markdown), scrollable; Escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "close")]

    def __init__(self, title: str, body: str, markdown: bool) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="text"):
            yield Label(Text(self.title_text), id="text-title")
            if self.markdown:
                yield Markdown(self.body, id="text-body")
            else:   # the daemon's text as it is: no markup read into it
                yield Static(Text(self.body), id="text-body")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class Confirm(ModalScreen[bool]):
    """Yes or no before a resume or an abort."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "yes"),
                                             Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            # A stop message may be longer than the screen: it scrolls, the buttons stay.
            with VerticalScroll(id="question-scroll"):
                yield Label(Text(self.question), id="question")
            with Horizontal(id="answers"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class SweepChanged(Message):
    def __init__(self, sweep_id: int) -> None:
        super().__init__()
        self.sweep_id = sweep_id


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
                table.add_row(*(Text(_cell(item.get(key))) for key, _ in columns))

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
