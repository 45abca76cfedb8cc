"""`sweepd logs [-f]`: a job's log printed or followed, each line styled by its mark (false
positives dimmed, evidence highlighted), the log's own SGR colours kept on a terminal,
tabs as tabs, every other control character escaped."""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from sweepd.cli.client import Client
from sweepd.cli.source import with_source
from sweepd.util.text import escape

LOG_POLL_S = 1.0
# How `logs` shows each mark (joblog.mark); plain when the output is not a terminal.
LOG_STYLES = {"evidence": "bold reverse red", "signal": "yellow", "false_positive": "dim"}


def _console() -> Console:
    # soft_wrap: a log line is never cut or folded; markup off: `[...]` in a log is text.
    return Console(highlight=False, markup=False, emoji=False, soft_wrap=True)


# A log's own colours (SGR: ESC [ ... m): shown on a terminal, dropped elsewhere. A tab
# is layout (rich expands it to the next tab stop). Every other control character stays
# escaped (sweepd.util.text.escape).
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _escape_log(text: str) -> str:
    return "\t".join(escape(part) for part in text.split("\t"))


def log_text(line: Mapping[str, Any], terminal: bool = False) -> Text:
    text, style = str(line["text"]), LOG_STYLES.get(str(line["mark"]), "")
    if not terminal:
        return Text(_escape_log(_SGR.sub("", text)), style=style)
    kept = "".join(_escape_log(part) + (sgr.group() if sgr else "")
                   for part, sgr in _sgr_split(text))
    return Text.from_ansi(kept, style=style)


def _sgr_split(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """The text between SGR sequences, each with the sequence after it."""
    out: list[tuple[str, re.Match[str] | None]] = []
    start = 0
    for m in _SGR.finditer(text):
        out.append((text[start:m.start()], m))
        start = m.end()
    return [*out, (text[start:], None)]


def _log_header(args: argparse.Namespace, chunk: Mapping[str, Any]) -> str:
    scheduler = f"scheduler job {chunk['backend_id']}" if chunk.get("backend_id") \
        else "not yet given a scheduler job id"
    return (f"sweep {args.id} run #{chunk['run_seq']} attempt {chunk['attempt']}, "
            f"{scheduler} (sweepd job {chunk['job']}, {chunk['state']}): "
            f"{escape(str(chunk['path'] or 'no log file yet'))}")


def run_logs(args: argparse.Namespace) -> int:
    from sweepd.cli.output import fail, say

    def body(client: Client) -> int:
        console = _console()
        chunk = client.reads.job_log(args.id, args.job, 0)
        if not args.json:
            say(_log_header(args, chunk), err=True)
        waiting = False
        while True:
            for line in chunk["lines"]:
                if args.json:
                    print(json.dumps(line, sort_keys=True), flush=True)
                else:
                    console.print(log_text(line, console.is_terminal))
            if chunk.get("not_started") and not waiting:
                waiting = True   # said once; with -f, wait for it to start
                say(f"sweep {args.id}: {chunk['missing']}"
                    + ("; waiting for it to start" if args.follow else ""), err=True)
            elif chunk.get("missing") and not chunk.get("not_started") and not args.follow:
                return fail(args, f"sweep {args.id}: {chunk['missing']}")
            if not chunk.get("more") and (not args.follow or chunk["ended"]):
                return 0
            if not chunk.get("more"):
                time.sleep(LOG_POLL_S)
            # By sweepd's own job number: the job the first answer named, whatever its id.
            chunk = client.reads.job_log(args.id, f"id:{chunk['job']}", chunk["next_offset"])

    return with_source(args, body)
