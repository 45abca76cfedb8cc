"""The live bar of `sweepd run` and `sweepd watch` on a terminal: the sweep's progress
(`app/progress.bar_line`) held on the bottom line, the event lines printed above it as
without one. Off (the plain lines, byte for byte) when stdout is not a terminal, TERM is
dumb, or with --json."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from sweepd.app.progress import bar_line
from sweepd.util.text import escape


def bar_wanted(json_output: bool = False, stream: TextIO | None = None) -> bool:
    """Decided here rather than by rich: rich takes FORCE_COLOR (set by many CI systems)
    as a terminal, and a pipe must get the plain lines."""
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):   # a closed or odd stream
        return False
    return tty and not json_output and os.environ.get("TERM", "") != "dumb"


class Bar:
    """Lines above, the bar below. Its methods may be called from another thread (watch's
    poller): rich's Live holds a lock around each redraw, and ours keeps the stderr dance
    whole."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream, force_terminal=True, highlight=False,
                               soft_wrap=True)
        # No refresh thread: the bar changes only when the sweep does (update), and a
        # thread of rich's own would redraw under asyncio's signal handling.
        self.live = Live(Text(""), console=self.console, auto_refresh=False, transient=True,
                         redirect_stdout=False, redirect_stderr=False)
        self.text = ""
        self._lock = threading.RLock()

    def say(self, text: str = "") -> None:
        """An event line above the bar, as `cli.output.say` prints it without one."""
        with self._lock:
            self.console.print(Text(escape(text, keep_newlines=True)), soft_wrap=True)

    def err(self, text: str) -> None:
        """A line on stderr: the bar is taken down first so the line is not drawn into it
        (stderr is the same terminal, most often), then put back."""
        with self._lock:
            self.live.stop()
            with contextlib.suppress(OSError, ValueError):
                print(escape(text, keep_newlines=True), file=sys.stderr, flush=True)
            self.live.start(refresh=bool(self.text))

    def update(self, progress: Mapping[str, Any]) -> None:
        text = bar_line(progress)
        with self._lock:
            if text == self.text:   # each engine pass tells it: redraw only a change
                return
            self.text = text
            self.live.update(Text(self.text, no_wrap=True, overflow="ellipsis"),
                             refresh=True)


@contextlib.contextmanager
def live_bar(json_output: bool = False, stream: TextIO | None = None) -> Iterator[Bar | None]:
    """A Bar on a terminal (taken down when the block ends), else None: print as before."""
    stream = stream or sys.stdout
    if not bar_wanted(json_output, stream):
        yield None
        return
    bar = Bar(stream)
    bar.live.start()
    try:
        yield bar
    finally:
        bar.live.stop()
