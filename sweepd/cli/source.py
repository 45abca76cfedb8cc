"""Where the CLI's views read from: the daemon's socket, or with --state-dir a state
directory's database (read-only); a refusal printed as the verbs print one; and an answer
printed as JSON (`--json`). Shared by every view module, so none imports another."""

from __future__ import annotations

import argparse
import json
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
    return Client(socket_path(args))


def with_source(args: argparse.Namespace, body: Callable[[Client], int]) -> int:
    from sweepd.cli.output import print_error

    try:
        with client_for(args) as client:
            return body(client)
    except ClientError as e:
        return print_error(e, args)
