"""The CLI verbs that talk to a running daemon over its Unix socket: `submit`, `watch`,
`explain`, `cancel`, `abort`, `resume`, and every client verb's parser. `list`, `show` and
`report` are cli/listing.py, cli/show.py and cli/report.py.

Exit codes: 0 ok, 1 the daemon failed or is unreachable, 2 bad input (a bad spec, an
unknown sweep, a refused operation); `watch` ends with 0 done, 3 awaiting a decision,
4 failed or aborted, 5 the daemon was lost and did not come back in time.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import shtab

from sweepd.cli.client import Client
from sweepd.cli.compare import compare_args, run_compare
from sweepd.cli.completion import sweep_id_arg
from sweepd.cli.listing import list_args, run_list
from sweepd.cli.output import (
    CONFIG_HELP,
    EXIT_DAEMON,
    SOCKET_HELP,
    RunFunc,
    client_command,
    fail,
    load_spec,
    print_json,
    say,
    summary_line,
    with_client,
)
from sweepd.cli.report import report_args, run_report
from sweepd.cli.show import run_show
from sweepd.cli.source import with_source
from sweepd.cli.validate import run_dry_run
from sweepd.cli.views import add_view_commands, state_dir_verbs
from sweepd.cli.watch import EXIT_CONNECTION_LOST, RECONNECT_S, watch
from sweepd.kinds.spec import SpecError
from sweepd.util.text import compact_nodes, escape


def run_submit(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
    except SpecError as e:
        return fail(args, str(e), e.errors)
    if args.dry_run:
        return run_dry_run(args)

    def submit(client: Client) -> int:
        summary = client.submit(spec)
        if args.json:
            print_json(summary)
        else:
            print(summary["id"])  # alone on stdout, for scripts
            say(f"submitted sweep {summary['id']}: {escape(summary['name'])}"
                + ("" if args.follow else f"; follow it with `sweepd watch {summary['id']}`"),
                err=True)
        return watch(args, summary["id"]) if args.follow else 0

    return with_client(args, submit)

def run_watch(args: argparse.Namespace) -> int:
    return watch(args, args.id)


def run_explain(args: argparse.Namespace) -> int:
    return with_source(args, functools.partial(_explain, args))


def _explain(args: argparse.Namespace, client: Client) -> int:
    out = client.reads.explain(args.id)
    if args.json:
        print_json(out)
    else:
        say("\n".join(out["lines"]) if out["lines"] else f"sweep {args.id}: no events")
    return 0


def _print_summary(args: argparse.Namespace, summary: Mapping[str, Any]) -> int:
    if args.json:
        print_json(summary)
    else:
        say(summary_line(summary))
    return 0


@client_command
def run_cancel(args: argparse.Namespace, client: Client) -> int:
    return _print_summary(args, client.controls.cancel(args.id))


@client_command
def run_abort(args: argparse.Namespace, client: Client) -> int:
    return _print_summary(args, client.controls.abort(args.id))


@client_command
def run_resume(args: argparse.Namespace, client: Client) -> int:
    summary = client.controls.resume(args.id, args.exclude or [], args.readmit or [])
    if not args.json and summary.get("excluded"):
        say(f"excluded nodes: {compact_nodes(summary['excluded'])}", err=True)
    return _print_summary(args, summary)


STOP_WAIT_S = 60.0   # how long `stop` waits for the daemon to close its socket


@client_command
def run_stop(args: argparse.Namespace, client: Client) -> int:
    """Ask the daemon over its socket to stop (its SIGTERM path), then wait until it has
    closed its socket: a daemon stops between two jobs, its jobs run on in the cluster."""
    if not client.shutdown().get("stopping"):
        return fail(args, "this daemon cannot be stopped over its socket")
    deadline = time.monotonic() + STOP_WAIT_S
    while client.socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if client.socket_path.exists():
        return fail(args, f"asked sweepd to stop; its socket {client.socket_path} is still "
                          f"there after {STOP_WAIT_S:g} s", code=EXIT_DAEMON)
    if args.json:
        print_json({"stopped": True, "socket": str(client.socket_path)})
    else:
        say(f"sweepd stopped (was on {client.socket_path})")
    return 0


# -- registration ------------------------------------------------------------------------

_VERBS: list[tuple[str, RunFunc, str]] = [
    ("list", run_list, "list the daemon's sweeps"),
    ("show", run_show, "a sweep's state, runs and jobs"),
    ("watch", run_watch, "print a sweep's progress as it lands, until it stops"),
    ("report", run_report, "a sweep's report (Markdown, or --json)"),
    ("explain", run_explain, "why the sweep did what it did: every decision and its rule"),
    ("cancel", run_cancel, "the same as abort, with the reason \"cancelled by a person\""),
    ("abort", run_abort, "end a sweep (running jobs are cancelled)"),
    ("resume", run_resume, "resume a sweep that awaits a decision"),
    ("compare", run_compare, "two sweeps side by side, and per value both sweeps' TGS"),
    ("stop", run_stop, "stop the daemon cleanly (as SIGTERM does); sweeps resume at its "
                       "next start"),
]


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before the verb, it must not be reset by the verb's default.
    common.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")
    # `validate` has its own --config (what it checks against): the others share this one,
    # the config whose [daemon] socket the verb talks to (found by itself when not given).
    bare = common
    common = argparse.ArgumentParser(add_help=False, parents=[bare])
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=CONFIG_HELP)

    p = sub.add_parser("submit", parents=[common], help="submit a sweep spec to the daemon",
                       epilog="prints the new sweep id; exit 2 if the spec is invalid; with "
                              "--follow, exits as watch does")
    spec = p.add_argument("spec", type=Path, help="sweep spec (YAML or JSON)")
    spec.complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--dry-run", action="store_true",
                   help="check the spec and print the plan (as validate); submit nothing")
    p.add_argument("--follow", action="store_true", help="then watch it, as `sweepd watch`")
    _reconnect_arg(p)
    p.set_defaults(func=run_submit)
    for name, func, helptext in _VERBS:
        p = sub.add_parser(name, parents=[common], help=helptext, description=helptext)
        if name == "compare":
            compare_args(p)
        elif name not in ("list", "stop"):
            sweep_id_arg(p)
        if name == "list":
            list_args(p)
        if name in state_dir_verbs():
            p.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                           help="read this state directory's database (read-only) instead "
                                "of asking the daemon (a `sweepd run`/`demo` result)")
        if name == "report":
            report_args(p)
        if name == "watch":
            p.epilog = ("exit codes: 0 done, 3 awaiting a decision, 4 failed or aborted, "
                        "5 the daemon was lost for longer than --reconnect")
            _reconnect_arg(p)
        if name == "resume":
            p.add_argument("--exclude", nargs="+", action="extend", metavar="NODE",
                           help="nodes to add to the sweep's exclusions (hostlist expressions)")
            p.add_argument("--readmit", nargs="+", action="extend", metavar="NODE",
                           help="excluded nodes to put back in use (e.g. repaired)")
        p.set_defaults(func=func)
    add_view_commands(sub, common, bare)


def _reconnect_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reconnect", type=float, default=RECONNECT_S, metavar="S",
                   help="when the daemon goes away (a restart), keep trying this many "
                        f"seconds, then exit {EXIT_CONNECTION_LOST} (default "
                        f"{RECONNECT_S:g})")
