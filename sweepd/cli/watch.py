"""`sweepd watch` (and `submit -f`): a sweep's progress lines across a daemon restart,
reconnecting and resuming after the last line printed (no gap, no repeat); exit 5 when
the daemon does not come back within --reconnect seconds."""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from sweepd.app.foreground import EXIT_FOR_STATE
from sweepd.cli.client import Client, ClientError
from sweepd.cli.progress_bar import Bar, live_bar
from sweepd.store.states import SweepState
from sweepd.util.text import escape

EXIT_CONNECTION_LOST = 5
RECONNECT_S = 60.0
# How often the terminal bar asks where the sweep is between its events (the running
# job's step moves without one).
BAR_POLL_S = 1.0


def _progress_key(p: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(p[k] for k in ("runs_started", "runs_done", "jobs_queued", "jobs_running"))


class Watcher:
    """Prints a sweep's progress lines from event `after` on; on a lost connection it
    reconnects and resumes after the last line it printed: no gap, no repeat."""

    def __init__(self, args: argparse.Namespace, sweep_id: int) -> None:
        from sweepd.cli.output import socket_path

        self.args = args
        self.sweep_id = sweep_id
        self.socket = socket_path(args)
        self.last = 0
        self.shown: tuple[Any, ...] | None = None   # set once the daemon first answered
        self.bar: Bar | None = None   # on a terminal: the live bar under the lines

    def _say(self, text: str) -> None:
        from sweepd.cli.output import say

        if self.bar is not None:
            self.bar.say(text)
        else:
            say(text)

    def _event(self, client: Client, event: Mapping[str, Any]) -> None:
        # The daemon may go between receiving the event and printing it: `last` moves only
        # once it is printed, so a reconnect fetches it again (no gap).
        progress = client.reads.show(self.sweep_id)["progress"]
        if self.args.json:
            print(json.dumps({**event, "progress": progress}, sort_keys=True), flush=True)
        else:
            self._say(event["reason"])
            if _progress_key(progress) != self.shown:
                self.shown = _progress_key(progress)
                self._say(f"  ({progress['line']})")
            if self.bar is not None:
                self.bar.update(progress)
        self.last = int(event["id"])

    @contextlib.contextmanager
    def _polling(self) -> Iterator[None]:
        """With the bar on, a thread asks where the sweep is every BAR_POLL_S while the
        stream waits for its next event; a failed ask is left to the stream to notice."""
        bar = self.bar
        if bar is None:
            yield
            return
        stop = threading.Event()

        def poll() -> None:
            with contextlib.suppress(ClientError), Client(self.socket) as client:
                while not stop.wait(BAR_POLL_S):
                    bar.update(client.reads.show(self.sweep_id)["progress"])

        thread = threading.Thread(target=poll, name="sweepd-watch-bar", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2 * BAR_POLL_S)

    def _pass(self) -> dict[str, Any] | None:
        """One connection: lines until the stream ends, then the sweep's summary; None when
        the connection was lost."""
        try:
            with Client(self.socket) as client:
                progress = client.reads.show(self.sweep_id)["progress"]
                if self.shown is None:   # what the sweep had before this watch began
                    self.shown = _progress_key(progress)
                if self.bar is not None:
                    self.bar.update(progress)
                with self._polling():
                    for event in client.reads.stream(self.sweep_id, self.last):
                        self._event(client, event)
                return client.reads.show(self.sweep_id)
        except ClientError as e:
            if e.status != 0 or self.shown is None:   # never reached: not a restart
                raise
            return None

    def run(self) -> int:
        with live_bar(self.args.json) as self.bar:
            return self._run()

    def _run(self) -> int:
        from sweepd.cli.output import fail, say

        lost_at: float | None = None
        while True:
            summary = self._pass()
            if summary is not None and SweepState(summary["state"]) in EXIT_FOR_STATE:
                if not self.args.json:
                    self._say(f"sweep {summary['id']}: {summary['state']}"
                        + (f" ({escape(summary['reason'])})" if summary.get("reason") else "")
                        + f" · {summary['progress']['line']}")
                return EXIT_FOR_STATE[SweepState(summary["state"])]
            now = time.monotonic()
            if lost_at is None:
                lost_at = now
                line = (f"sweepd: lost the daemon at {self.socket}; reconnecting (up to "
                        f"{self.args.reconnect:g}s)")
                if self.bar is not None:
                    self.bar.err(line)
                else:
                    say(line, err=True)
            elif now - lost_at > self.args.reconnect:
                if self.bar is not None:   # the refusal below the lines, not in the bar
                    self.bar.live.stop()
                return fail(self.args, f"lost the connection to sweepd at {self.socket} and "
                            f"could not reconnect within {self.args.reconnect:g}s",
                            code=EXIT_CONNECTION_LOST)
            if summary is not None:
                lost_at = None   # the daemon answered: only a closed stream (restart)
            time.sleep(0.2)


def watch(args: argparse.Namespace, sweep_id: int) -> int:
    from sweepd.cli.output import print_error

    try:
        return Watcher(args, sweep_id).run()
    except ClientError as e:
        return print_error(e, args)
