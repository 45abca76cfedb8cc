"""The CLI verbs that talk to a running daemon over its Unix socket.

Exit codes: 0 ok, 1 the daemon failed or is unreachable, 2 bad input (a bad spec, an
unknown sweep, a refused operation); `watch` ends with 0 done, 3 awaiting a decision,
4 failed or aborted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from sweepd.client import Client, ClientError
from sweepd.foreground import EXIT_BAD_INPUT, EXIT_FOR_STATE
from sweepd.specs import SpecError, parse_spec
from sweepd.states import SweepState

DEFAULT_SOCKET = Path("/run/sweepd/sweepd.sock")
EXIT_DAEMON = 1

RunFunc = Callable[[argparse.Namespace], int]


# -- output ------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).splitlines()[0] if str(value) else ""


def format_table(rows: Sequence[Mapping[str, Any]],
                 columns: Sequence[tuple[str, str]]) -> str:
    """Rows as left-aligned columns; `columns` is (key, header) pairs."""
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in cells)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _print_details(details: Sequence[Mapping[str, Any]]) -> None:
    for d in details:
        loc = ".".join(str(p) for p in d.get("loc") or []) or "spec"
        print(f"  {loc}: {d.get('msg', '')}", file=sys.stderr)


def print_error(e: ClientError) -> int:
    """One message on stderr (and its field details); returns the exit code."""
    print(f"sweepd: {e.message}", file=sys.stderr)
    _print_details(e.details)
    return EXIT_DAEMON if e.status == 0 or e.status >= 500 else EXIT_BAD_INPUT


def _summary_line(s: Mapping[str, Any]) -> str:
    reason = f" ({s['reason']})" if s.get("reason") else ""
    return f"sweep {s['id']}: {s['state']}{reason}"


# -- plumbing ----------------------------------------------------------------------------

def socket_path(args: argparse.Namespace) -> Path:
    if args.socket is not None:
        return Path(args.socket)
    return Path(os.environ.get("SWEEPD_SOCKET") or DEFAULT_SOCKET)


def _client_command(func: Callable[[argparse.Namespace, Client], int]) -> RunFunc:
    """Open a client on the chosen socket; a refused request becomes a message + code."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            with Client(socket_path(args)) as client:
                return func(args, client)
        except ClientError as e:
            return print_error(e)

    return run


# -- the verbs ---------------------------------------------------------------------------

def _load_spec(path: Path) -> Any:
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except OSError as e:
        raise SpecError(f"cannot read spec {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path} is not valid YAML/JSON: {e}") from None
    # Checked here first so a typo gets a clear answer without a daemon round trip.
    return parse_spec(data).model_dump(mode="json", exclude_unset=True)


def run_submit(args: argparse.Namespace) -> int:
    try:
        spec = _load_spec(args.spec)
    except SpecError as e:
        print(f"sweepd: {e}", file=sys.stderr)
        _print_details(e.errors)
        return EXIT_BAD_INPUT
    return _submit(args, spec)


@_client_command
def _submit(args: argparse.Namespace, client: Client) -> int:
    summary = client.submit(args.spec_data) if hasattr(args, "spec_data") else None
    del summary
    raise AssertionError("replaced below")  # pragma: no cover


def _submit_spec(args: argparse.Namespace, client: Client, spec: Any) -> int:
    summary = client.submit(spec)
    if args.json:
        _print_json(summary)
    else:
        print(summary["id"])
        print(f"submitted sweep {summary['id']}: {summary['name']}; follow it with "
              f"`sweepd watch {summary['id']}`", file=sys.stderr)
    return 0
