"""The widgets and screens of `sweepd top`: a sweep's row (bar, sparkline, latest line), the
explain / report screen, the yes-or-no before a resume or an abort, and the message a
follower posts when a sweep moved. The app (`cli/top.py`) lays them out and feeds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Label, ListItem, Markdown, ProgressBar, Sparkline, Static

from sweepd.cli.output import runs_cell
from sweepd.cli.top_fields import STOPPED, latest_line, progress_of, tgs_series


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
    """A sweep's follower saw new events: the app refreshes its row."""

    def __init__(self, sweep_id: int) -> None:
        super().__init__()
        self.sweep_id = sweep_id
