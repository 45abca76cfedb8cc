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

from sweepd.client import Client, ClientError
from sweepd.columns import align
from sweepd.foreground import EXIT_BAD_INPUT, EXIT_FOR_STATE
from sweepd.reports.apply import ApplyError, apply_to_config
from sweepd.specs import SpecError, parse_spec, read_spec_file
from sweepd.states import SweepState
from sweepd.text import compact_nodes, escape

DEFAULT_SOCKET = Path("/run/sweepd/sweepd.sock")
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


def _cell(value: Any) -> str:
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
    cells += [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    return "\n".join(align(cells))


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _line(text: str) -> str:
    text = escape(text)
    return text if len(text) <= MAX_LINE_CHARS else f"{text[:MAX_LINE_CHARS]}… (cut)"


def _print_details(details: Sequence[Mapping[str, Any]]) -> None:
    lines = [f"  {'.'.join(str(p) for p in d.get('loc') or []) or 'spec'}: {d.get('msg', '')}"
             for d in details[:MAX_DETAIL_LINES + 1]]
    if len(details) > MAX_DETAIL_LINES:
        lines = [*lines[:MAX_DETAIL_LINES - 1],
                 f"  … and {len(details) - MAX_DETAIL_LINES + 1} more"]
    for line in lines:
        say(_line(line), err=True)


def _print_failure(message: str, details: Sequence[Mapping[str, Any]]) -> None:
    """The headline, then one line per field; a message without fields alone (with
    fields, the message's tail repeats them). Bounded whatever the daemon sent."""
    fields = any(d.get("loc") for d in details)
    repeated = fields and any(str(d.get("msg", "")) in message
                              for d in details[:MAX_DETAIL_LINES])
    say(_line(f"sweepd: {message.split(': ', 1)[0] if repeated else message}"), err=True)
    if fields:
        _print_details(details)


def exit_code(e: ClientError) -> int:
    return EXIT_DAEMON if e.status == 0 or e.status >= 500 else EXIT_BAD_INPUT


def fail(args: argparse.Namespace, message: str, details: Sequence[Mapping[str, Any]] = (),
         code: int = EXIT_BAD_INPUT) -> int:
    """A refusal: with --json, `{"error", "details", "exit"}` on stdout (what scripts read);
    else a message on stderr. Returns the exit code, the same either way."""
    if getattr(args, "json", False):
        _print_json({"error": _line(message), "exit": code,
                     "details": [dict(d) for d in bounded_details(list(details))]})
    else:
        _print_failure(message, details)
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


def _summary_line(s: Mapping[str, Any]) -> str:
    reason = f" ({escape(s['reason'])})" if s.get("reason") else ""
    return f"sweep {s['id']}: {s['state']}{reason}"


# -- plumbing ----------------------------------------------------------------------------

def socket_path(args: argparse.Namespace) -> Path:
    if args.socket is not None:
        return Path(args.socket)
    return Path(os.environ.get("SWEEPD_SOCKET") or DEFAULT_SOCKET)


def with_client(args: argparse.Namespace, body: Callable[[Client], int]) -> int:
    """Run `body` with a client on the chosen socket; a refused request -> message + code."""
    try:
        with Client(socket_path(args)) as client:
            return body(client)
    except ClientError as e:
        return print_error(e, args)


def _client_command(func: Callable[[argparse.Namespace, Client], int]) -> RunFunc:
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        return with_client(args, functools.partial(func, args))

    return run


# -- the verbs ---------------------------------------------------------------------------

def _load_spec(path: Path) -> Any:
    # Checked here first so a typo gets a clear answer without a daemon round trip.
    return parse_spec(read_spec_file(path)).model_dump(mode="json", exclude_unset=True)


def print_spec_error(e: SpecError) -> None:
    _print_failure(str(e), e.errors)


def run_submit(args: argparse.Namespace) -> int:
    try:
        spec = _load_spec(args.spec)
    except SpecError as e:
        return fail(args, str(e), e.errors)

    def submit(client: Client) -> int:
        summary = client.submit(spec)
        if args.json:
            _print_json(summary)
        else:
            print(summary["id"])  # alone on stdout, for scripts
            say(f"submitted sweep {summary['id']}: {escape(summary['name'])}; follow it with "
                f"`sweepd watch {summary['id']}`", err=True)
        return 0

    return with_client(args, submit)


_LIST_COLUMNS = [("id", "ID"), ("state", "STATE"), ("kind", "KIND"), ("runs", "RUNS"),
                 ("updated_at", "UPDATED"), ("name", "NAME")]
_RUN_COLUMNS = [("seq", "#"), ("label", "RUN"), ("state", "STATE"), ("outcome", "OUTCOME"),
                ("tgs", "TGS"), ("mfu", "MFU"), ("failure_class", "FAILURE")]
_JOB_COLUMNS = [("id", "JOB"), ("run_seq", "RUN #"), ("attempt", "TRY"), ("backend_id", "SLURM ID"),
                ("nodes", "NODES"), ("state", "STATE"), ("failure_class", "FAILURE")]


@_client_command
def run_list(args: argparse.Namespace, client: Client) -> int:
    sweeps = client.list_sweeps()
    if args.json:
        _print_json(sweeps)
    elif not sweeps:
        say("no sweeps")
    else:
        say(format_table(sweeps, _LIST_COLUMNS))
    return 0


@_client_command
def run_show(args: argparse.Namespace, client: Client) -> int:
    s = client.show(args.id)
    if args.json:
        _print_json(s)
        return 0
    say(f"sweep {s['id']}: {escape(s['name'])}")
    say(f"  kind: {s['kind']}   nodes: {escape(str(s['spec'].get('nodes', '-')))}")
    say(f"  state: {s['state']}" + (f" ({escape(s['reason'])})" if s.get("reason") else ""))
    say(f"  created: {s['created_at']}   updated: {s['updated_at']}")
    excluded = [e["node"] for e in s["exclusions"] if e.get("active")]
    if excluded:
        say(f"  excluded nodes: {escape(', '.join(excluded))}")
    if s["verdict"]:
        _print_verdict(s["id"], s["verdict"])
    # Jobs name their run by the runs table's `#`, not by the store's global run id.
    seq_of = {r["id"]: r["seq"] for r in s["run_list"]}
    jobs = [{**j, "run_seq": seq_of.get(j["run_id"], j["run_id"])} for j in s["jobs"]]
    for title, rows, columns in (("runs", s["run_list"], _RUN_COLUMNS),
                                 ("jobs", jobs, _JOB_COLUMNS)):
        if rows:
            say(f"\n{title}:")
            say(format_table(rows, columns))
    return 0


def _print_verdict(sweep_id: int, verdict: Mapping[str, Any]) -> None:
    """Its plain fields; tables and lists are the report's to show."""
    say("  verdict:")
    nested = []
    for key, value in sorted(verdict.items()):
        if isinstance(value, dict | list):
            nested.append(key)
        else:
            say(f"    {escape(key)}: {_cell(value)}")
    if nested:
        say(f"    ({escape(', '.join(nested))}: see `sweepd report {sweep_id}`)")


@_client_command
def run_watch(args: argparse.Namespace, client: Client) -> int:
    for event in client.stream(args.id):
        if args.json:
            print(json.dumps(event, sort_keys=True), flush=True)
        else:
            say(event["reason"])
    summary = client.show(args.id)
    state = SweepState(summary["state"])
    if state not in EXIT_FOR_STATE:  # the daemon stopped while the sweep was running
        say(f"sweepd: the daemon closed the stream; {_summary_line(summary)}", err=True)
        return EXIT_DAEMON
    if not args.json:
        say(_summary_line(summary))
    return EXIT_FOR_STATE[state]



@_client_command
def run_report(args: argparse.Namespace, client: Client) -> int:
    if args.apply is not None:
        return _apply(args, client)
    if args.plot is not None:
        code = _write_plot(args, client)
        if code:
            return code
    if args.json:
        _print_json(client.report(args.id)["json"])
    else:
        say(client.report_markdown(args.id), end="")
    return 0


def _plot_problem(path: Path) -> str | None:
    """Why `path` cannot take the plot, known before the daemon draws it."""
    if path.is_dir():
        return "it is a directory"
    if not path.parent.is_dir():
        return f"there is no directory {path.parent}"
    return None


def _write_plot(args: argparse.Namespace, client: Client) -> int:
    path: Path = args.plot
    problem = _plot_problem(path)
    if problem is None:
        png = client.plot(args.id)
        if png is None:
            say(f"sweep {args.id}: nothing to plot", err=True)
            return 0
        try:
            path.write_bytes(png)
        except OSError as e:
            problem = e.strerror or type(e).__name__
    if problem is not None:
        return fail(args, f"cannot write the plot to {path}: {problem}")
    say(f"plot written to {path}", err=True)
    return 0


def _apply(args: argparse.Namespace, client: Client) -> int:
    report = client.report(args.id)["json"]
    verdict = report.get("verdict") or {}
    if verdict.get("best") is None or "parameter" not in verdict:
        return fail(args, f"sweep {args.id} has no optimum to apply")
    model = str(report["sweep"]["spec"].get("model"))
    if not Path(args.apply).name.startswith(f"{model}."):
        # An optimum is only valid for the model it was measured on.
        return fail(args, f"sweep {args.id} measured {model}; {args.apply} is not "
                          f"{model}'s config (expected configs/{model}.gpu.yml)")
    try:
        line = apply_to_config(args.apply, verdict["parameter"], verdict["best"])
    except ApplyError as e:
        return fail(args, str(e))
    say(f"{args.apply}: {line}")
    return 0


@_client_command
def run_explain(args: argparse.Namespace, client: Client) -> int:
    out = client.explain(args.id)
    if args.json:
        _print_json(out)
    else:
        say("\n".join(out["lines"]) if out["lines"] else f"sweep {args.id}: no events")
    return 0


def _print_summary(args: argparse.Namespace, summary: Mapping[str, Any]) -> int:
    if args.json:
        _print_json(summary)
    else:
        say(_summary_line(summary))
    return 0


@_client_command
def run_cancel(args: argparse.Namespace, client: Client) -> int:
    return _print_summary(args, client.cancel(args.id))


@_client_command
def run_abort(args: argparse.Namespace, client: Client) -> int:
    return _print_summary(args, client.abort(args.id))


@_client_command
def run_resume(args: argparse.Namespace, client: Client) -> int:
    summary = client.resume(args.id, args.exclude or [], args.readmit or [])
    if not args.json and summary.get("excluded"):
        say(f"excluded nodes: {compact_nodes(summary['excluded'])}", err=True)
    return _print_summary(args, summary)


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
]


SOCKET_HELP = f"daemon socket (default: $SWEEPD_SOCKET, else {DEFAULT_SOCKET})"


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before the verb, it must not be reset by the verb's default.
    common.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    common.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("submit", parents=[common], help="submit a sweep spec to the daemon",
                       epilog="prints the new sweep id; exit 2 if the spec is invalid")
    p.add_argument("spec", type=Path, help="sweep spec (YAML or JSON)")
    p.set_defaults(func=run_submit)
    for name, func, helptext in _VERBS:
        p = sub.add_parser(name, parents=[common], help=helptext, description=helptext)
        if name != "list":
            p.add_argument("id", type=int, help="sweep id")
        if name == "report":
            p.add_argument("--plot", type=Path, metavar="FILE.png",
                           help="also write the sweep's plot (PNG) to this file")
            p.add_argument("--apply", type=Path, metavar="MODEL.gpu.yml",
                           help="write the optimum into this model config (one line)")
        if name == "watch":
            p.epilog = "exit codes: 0 done, 3 awaiting a decision, 4 failed or aborted"
        if name == "resume":
            p.add_argument("--exclude", nargs="+", action="extend", metavar="NODE",
                           help="nodes to add to the sweep's exclusions (hostlist expressions)")
            p.add_argument("--readmit", nargs="+", action="extend", metavar="NODE",
                           help="excluded nodes to put back in use (e.g. repaired)")
        p.set_defaults(func=func)
