"""Where the CLI's views read from: the daemon's socket, or with --state-dir a state
directory's database (read-only); a refusal printed as the verbs print one; and an answer
printed as JSON (`--json`). Shared by every view module, so none imports another."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweepd.cli.client import Client, ClientError


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), flush=True)


def client_for(args: argparse.Namespace) -> Client:
    """The daemon's socket, or with --state-dir the directory's database, read-only."""
    from sweepd.cli.offline import OfflineClient
    from sweepd.cli.output import socket_path

    state_dir: Path | None = getattr(args, "state_dir", None)
    if state_dir is not None:
        return OfflineClient(state_dir)
    socket = socket_path(args)
    if hasattr(args, "state_dir"):   # a verb that reads a state directory
        from sweepd.cli.offline import stopped_daemons_state

        found = stopped_daemons_state(args, socket)
        if found is not None:
            print(f"daemon not running at {socket}: reading its state directory {found} "
                  "(read-only, as --state-dir)", file=sys.stderr, flush=True)
            return OfflineClient(found)
    return Client(socket)


def with_source(args: argparse.Namespace, body: Callable[[Client], int]) -> int:
    from sweepd.cli.output import print_error

    try:
        with client_for(args) as client:
            return body(client)
    except ClientError as e:
        return print_error(e, args)
