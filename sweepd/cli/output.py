"""What every CLI verb shares: printing (text or JSON), refusals and their exit codes, the
socket and the client on it, reading a spec file."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepd.app.foreground import EXIT_BAD_INPUT
from sweepd.cli.client import Client, ClientError
from sweepd.config import DEFAULT_SOCKET, find_socket
from sweepd.kinds.parse import leaves_nodes_out, parse_spec, read_spec_file
from sweepd.kinds.spec import SpecError
from sweepd.util.columns import align
from sweepd.util.text import escape

EXIT_DAEMON = 1

RunFunc = Callable[[argparse.Namespace], int]


# -- output ------------------------------------------------------------------------------

# A refusal prints at most this many field lines, each at most this long.
MAX_DETAIL_LINES = 20
MAX_LINE_CHARS = 400


def say(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    """Print for a person: every text from the daemon (names, reasons, log lines, node
    names) goes through here, its control characters escaped."""
    print(escape(text, keep_newlines=True), file=sys.stderr if err else sys.stdout, end=end,
          flush=True)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):   # TGS to the token, MFU % to a tenth
        return (f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 1
                else f"{value:.3g}")
    return escape(str(value))   # one cell, one line: a newline in it is shown as \n


def format_table(rows: Sequence[Mapping[str, Any]],
                 columns: Sequence[tuple[str, str]]) -> str:
    """Rows as left-aligned columns; `columns` is (key, header) pairs."""
    cells = [[header for _, header in columns]]
    cells += [[cell(row.get(key)) for key, _ in columns] for row in rows]
    return "\n".join(align(cells))


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _line(text: str) -> str:
    text = escape(text)
    return text if len(text) <= MAX_LINE_CHARS else f"{text[:MAX_LINE_CHARS]}… (cut)"


def _detail_lines(detail: Mapping[str, Any]) -> list[str]:
    """A field's message as lines: one of several lines (a pre-flight's list) prints as
    lines, never as one line with literal `\n`s cut at the width limit."""
    where = ".".join(str(p) for p in detail.get("loc") or []) or "spec"
    first, *rest = str(detail.get("msg", "")).splitlines() or [""]
    return [f"  {where}: {first}", *(f"    {line.strip()}" for line in rest if line.strip())]


def _print_details(details: Sequence[Mapping[str, Any]]) -> None:
    if len(details) > MAX_DETAIL_LINES:
        lines = [f"  {'.'.join(str(p) for p in d.get('loc') or []) or 'spec'}: "
                 f"{str(d.get('msg', '')).splitlines()[0] if d.get('msg') else ''}"
                 for d in details[:MAX_DETAIL_LINES - 1]]
        lines.append(f"  … and {len(details) - MAX_DETAIL_LINES + 1} more")
    else:
        lines = [line for d in details for line in _detail_lines(d)]
        if len(lines) > MAX_DETAIL_LINES:   # the lines of a few long messages: bounded too
            lines = [*lines[:MAX_DETAIL_LINES - 1],
                     f"  … and {len(lines) - MAX_DETAIL_LINES + 1} more line(s)"]
    for line in lines:
        say(_line(line), err=True)


def print_failure(message: str, details: Sequence[Mapping[str, Any]]) -> None:
    """The headline, then one line per field; a message without fields alone (with
    fields, the message's tail repeats them). Bounded whatever the daemon sent."""
    # A field whose text is the whole message (a refusal about one field) adds nothing:
    # printing it as well would say the message twice.
    details = [d for d in details if str(d.get("msg", "")) != message]
    fields = any(d.get("loc") for d in details)
    repeated = fields and any(str(d.get("msg", "")) in message
                              for d in details[:MAX_DETAIL_LINES])
    head = message.split(": ", 1)[0] if repeated else message
    # A message of several lines (a YAML error's position) prints as lines, each escaped.
    lines = head.splitlines() or [""]
    say(_line(f"sweepd: {lines[0]}"), err=True)
    for line in lines[1:MAX_DETAIL_LINES]:
        say(_line(f"  {line.strip()}"), err=True)
    if fields:
        _print_details(details)


def exit_code(e: ClientError) -> int:
    return EXIT_DAEMON if e.status == 0 or e.status >= 500 else EXIT_BAD_INPUT


def fail(args: argparse.Namespace, message: str, details: Sequence[Mapping[str, Any]] = (),
         code: int = EXIT_BAD_INPUT) -> int:
    """A refusal: with --json, `{"error", "details", "exit"}` on stdout (what scripts read);
    else a message on stderr. Returns the exit code, the same either way."""
    if getattr(args, "json", False):
        print_json({"error": _line(message), "exit": code,
                     "details": [dict(d) for d in bounded_details(list(details))]})
    else:
        print_failure(message, details)
    return code


def bounded_details(details: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if len(details) <= MAX_DETAIL_LINES:
        return details
    rest = len(details) - MAX_DETAIL_LINES + 1
    return [*details[:MAX_DETAIL_LINES - 1], {"loc": [], "msg": f"… and {rest} more"}]


def print_error(e: ClientError, args: argparse.Namespace | None = None) -> int:
    """One message on stderr (and its field details), or JSON on stdout with --json;
    returns the exit code."""
    return fail(args or argparse.Namespace(), e.message, e.details, exit_code(e))


def runs_cell(done: int, most: int | None, ended: bool) -> str:
    """Runs finished of the most the sweep may take, as `list` and `top` both show it:
    `4/≤12` while it may go on, `13/13` once ended, `4/?` with no fixed most."""
    return f"{done}/" + ("?" if most is None else str(most) if ended else f"≤{most}")


def summary_line(s: Mapping[str, Any]) -> str:
    reason = f" ({escape(s['reason'])})" if s.get("reason") else ""
    return f"sweep {s['id']}: {s['state']}{reason}"


# -- plumbing ----------------------------------------------------------------------------

def socket_path(args: argparse.Namespace) -> Path:
    """--socket, $SWEEPD_SOCKET, the found config's [daemon] socket (config.find_socket)."""
    return find_socket(getattr(args, "socket", None), getattr(args, "config", None))


def with_client(args: argparse.Namespace, body: Callable[[Client], int]) -> int:
    """Run `body` with a client on the chosen socket; a refused request -> message + code."""
    try:
        with Client(socket_path(args)) as client:
            return body(client)
    except ClientError as e:
        return print_error(e, args)


def client_command(func: Callable[[argparse.Namespace, Client], int]) -> RunFunc:
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        return with_client(args, functools.partial(func, args))

    return run


# -- the verbs ---------------------------------------------------------------------------

def load_spec(path: Path) -> Any:
    # Checked here first so a typo gets a clear answer without a daemon round trip.
    data = read_spec_file(path)
    dumped = parse_spec(data, client=True).model_dump(mode="json", exclude_unset=True)
    if leaves_nodes_out(data):   # the daemon's cluster decides (the local backend's node)
        dumped.pop("nodes", None)
    return dumped


def print_spec_error(e: SpecError) -> None:
    print_failure(str(e), e.errors)


SOCKET_HELP = ("daemon socket (default: $SWEEPD_SOCKET, else the [daemon] socket of the config "
               f"--config names or is found, else {DEFAULT_SOCKET})")
CONFIG_HELP = ("the TOML settings file (default: $SWEEPD_CONFIG, else the one `sweepd init` "
               "wrote, ~/.config/sweepd/sweepd.toml, else /etc/sweepd/sweepd.toml)")
