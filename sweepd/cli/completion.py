"""Shell completion: `sweepd completion bash|zsh` (shtab, from the command line's own
parser), the hidden `_ids` verb it calls for sweep ids, and the sweep-id argument that
offers them."""

from __future__ import annotations

import argparse
import json

import shtab

from sweepd.cli.client import Client, ClientError
from sweepd.cli.source import print_json

_IDS_BASH = '_sweepd_ids() { compgen -W "$(sweepd _ids 2>/dev/null)" -- "$1"; }\n'
_IDS_ZSH = ('_sweepd_ids() { local -a ids; ids=(${(f)"$(sweepd _ids 2>/dev/null)"}); '
            "compadd -a ids; }\n")
SWEEP_ID_COMPLETE = {"bash": "_sweepd_ids", "zsh": "_sweepd_ids",
                     "preamble": {"bash": _IDS_BASH, "zsh": _IDS_ZSH}}


def run_completion(args: argparse.Namespace) -> int:
    # The whole parser comes from the command line's own (`parser_factory`, a default of
    # its root): importing it here would make views and the command line import each other.
    script = shtab.complete(args.parser_factory(), args.shell)
    if args.json:
        print_json({"shell": args.shell, "script": script})
    else:
        print(script, end="")
    return 0


def run_ids(args: argparse.Namespace) -> int:
    """The sweep ids, newest first, one a line (what completion offers); quiet on errors."""
    from sweepd.cli.output import socket_path

    try:
        with Client(socket_path(args), timeout_s=5) as client:
            ids = [s["id"] for s in client.find_sweeps()]
        print(json.dumps(ids) if args.json else "\n".join(map(str, ids)))
    except ClientError:
        return 1
    return 0


def sweep_id_arg(p: argparse.ArgumentParser) -> None:
    action = p.add_argument("id", type=int, help="sweep id")
    action.complete = SWEEP_ID_COMPLETE  # type: ignore[attr-defined]
