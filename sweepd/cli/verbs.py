"""The CLI verbs that talk to a running daemon over its Unix socket.

Exit codes: 0 ok, 1 the daemon failed or is unreachable, 2 bad input (a bad spec, an
unknown sweep, a refused operation); `watch` ends with 0 done, 3 awaiting a decision,
4 failed or aborted, 5 the daemon was lost and did not come back in time.
"""

from __future__ import annotations

import argparse
import functools
import os
import pwd
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import shtab

from sweepd.app.progress import duration
from sweepd.cli.client import Client
from sweepd.cli.completion import sweep_id_arg
from sweepd.cli.output import (
    SOCKET_HELP,
    RunFunc,
    cell,
    client_command,
    fail,
    format_table,
    load_spec,
    print_json,
    runs_cell,
    say,
    summary_line,
    with_client,
)
from sweepd.cli.source import with_source
from sweepd.cli.validate import run_dry_run
from sweepd.cli.views import add_view_commands, state_dir_verbs
from sweepd.cli.watch import EXIT_CONNECTION_LOST, RECONNECT_S, watch
from sweepd.core.states import SweepState
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, kinds
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


_LIST_COLUMNS = [("id", "ID"), ("state", "STATE"), ("kind", "KIND"), ("runs", "RUNS"),
                 ("jobs", "JOBS"), ("elapsed", "ELAPSED"), ("eta", "ETA"),
                 ("submitted_by", "USER"), ("updated_at", "UPDATED"), ("name", "NAME")]
_RUN_COLUMNS = [("seq", "#"), ("label", "RUN"), ("state", "STATE"), ("outcome", "OUTCOME"),
                ("tgs", "TGS"), ("mfu", "MFU"), ("failure_class", "FAILURE")]
_JOB_COLUMNS = [("id", "JOB"), ("run_seq", "RUN #"), ("attempt", "TRY"), ("backend_id", "SLURM ID"),
                ("nodes", "NODES"), ("state", "STATE"), ("failure_class", "FAILURE")]


def _list_row(s: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's progress in the list's short cells: `4/≤12`, `1q 2r`, `12m`, `≤30m?`."""
    p = s["progress"]
    jobs = " ".join(f"{p[k]}{k[5]}" for k in ("jobs_queued", "jobs_running") if p[k])
    eta = (None if p["eta_s"] is None else "-" if p["eta_s"] == 0
           else f"≤{duration(p['eta_s'])}{'?' if p['eta_guess'] else ''}")
    link = s.get("campaign")   # a campaign's stage says which, and of which campaign
    name = f"{s['name']} [campaign {link['id']}: {link['stage']}]" if link else s.get("name")
    return {**s, "name": name,
            "runs": runs_cell(p["runs_done"], p["runs_most"], bool(p.get("ended"))),
            "jobs": jobs or None,
            "elapsed": duration(p["elapsed_s"]), "eta": eta}


def _since(text: str | None) -> str | None:
    """`2h`, `3d`, `45m` ago, or an ISO date/time (UTC), as the store writes times."""
    if text is None:
        return None
    m = re.fullmatch(r"([0-9]+)\s*([mhd])", text.strip())
    if m:
        delta = timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
        at = datetime.now(UTC) - delta
    else:
        try:
            at = datetime.fromisoformat(text.strip())
        except ValueError:
            raise SpecError(f"--since {text!r}: give 45m, 2h, 3d or an ISO time "
                            "(2026-01-31 or 2026-01-31T12:00)") from None
        at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
# `list --state cancelled`: the sweeps `cancel` ended. They are `aborted` (a cancel is an
# abort with its own reason, app/service.py), told apart by that reason.
CANCELLED = "cancelled"
CANCELLED_REASON = "cancelled by a person"


def run_list(args: argparse.Namespace) -> int:
    try:
        since = _since(args.since)
    except SpecError as e:
        return fail(args, str(e))
    user = pwd.getpwuid(os.getuid()).pw_name if args.mine else None

    states = list(args.state or [])
    cancelled_only = CANCELLED in states and str(SweepState.ABORTED) not in states
    states = list(dict.fromkeys(str(SweepState.ABORTED) if s == CANCELLED else s
                                for s in states))

    def body(client: Client) -> int:
        sweeps = client.find_sweeps(states, args.kind or [], since, user)
        if cancelled_only:   # `cancel` ends a sweep as aborted, with its own reason
            sweeps = [s for s in sweeps if s["state"] != SweepState.ABORTED
                      or str(s.get("reason") or "").startswith(CANCELLED_REASON)]
        if args.json:
            print_json(sweeps)
        elif not sweeps:
            say("no sweeps")
        else:
            say(format_table([_list_row(s) for s in sweeps], _LIST_COLUMNS))
        return 0

    return with_client(args, body)


@client_command
def run_show(args: argparse.Namespace, client: Client) -> int:
    s = client.show(args.id)
    if args.json:
        print_json(s)
        return 0
    say(f"sweep {s['id']}: {escape(s['name'])}")
    say(f"  kind: {s['kind']}   nodes: {escape(str(s['spec'].get('nodes', '-')))}")
    say(f"  state: {s['state']}" + (f" ({escape(s['reason'])})" if s.get("reason") else ""))
    say(f"  created: {s['created_at']}   updated: {s['updated_at']}"
        + (f"   by: {escape(s['submitted_by'])}" if s.get("submitted_by") else ""))
    say(f"  progress: {s['progress']['line']}")
    if s.get("campaign"):
        say(f"  campaign: sweep {s['campaign']['id']}, stage {s['campaign']['stage']}")
    if s.get("stages"):
        say("  stages: " + ", ".join(f"{c['stage']} = sweep {c['sweep']} ({c['state']})"
                                     for c in s["stages"]))
    if s["progress"]["eta_s"]:
        say(f"  ETA basis: {s['progress']['eta_basis']}")
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
            say(f"    {escape(key)}: {cell(value)}")
    if nested:
        say(f"    ({escape(', '.join(nested))}: see `sweepd report {sweep_id}`)")


def run_watch(args: argparse.Namespace) -> int:
    return watch(args, args.id)


def run_report(args: argparse.Namespace) -> int:
    return with_source(args, functools.partial(_report, args))


def _report(args: argparse.Namespace, client: Client) -> int:
    if args.tuning_md is not None or args.apply is not None:
        return _report_action(args, client.report(args.id)["json"])
    if args.plot is not None:
        code = _write_plot(args, client)
        if code:
            return code
    if args.json:
        print_json(client.report(args.id)["json"])
    else:
        say(client.report_markdown(args.id), end="")
    return 0


def _report_action(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """`--apply` / `--tuning-md`: the sweep's kind writes what it has (`ClientHooks`)."""
    kind = report["sweep"]["kind"]
    hooks = kinds()[kind].client if kind in kinds() else None
    takes = hooks.flags if hooks is not None and hooks.report_action is not None else set()
    if args.tuning_md is not None and "tuning_md" not in takes:
        writers = " or ".join(k for k, v in sorted(kinds().items())
                              if "tuning_md" in v.client.flags)
        return fail(args, f"sweep {args.id} is a {kind} sweep: --tuning-md is for {writers} "
                          "sweeps only (their <MODEL_TAG>-campaign.md or -tuning.md)")
    if hooks is None or hooks.report_action is None or "apply" not in takes:
        return fail(args, f"sweep {args.id} has no optimum to apply")
    return hooks.report_action(args, report, ClientOutput(fail, say, print_json))


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


def run_explain(args: argparse.Namespace) -> int:
    return with_source(args, functools.partial(_explain, args))


def _explain(args: argparse.Namespace, client: Client) -> int:
    out = client.explain(args.id)
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
    return _print_summary(args, client.cancel(args.id))


@client_command
def run_abort(args: argparse.Namespace, client: Client) -> int:
    return _print_summary(args, client.abort(args.id))


@client_command
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




def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before the verb, it must not be reset by the verb's default.
    common.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")

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
        if name != "list":
            sweep_id_arg(p)
        if name == "list":
            _list_args(p)
        if name in state_dir_verbs():
            p.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                           help="read this state directory's database (read-only) instead "
                                "of asking the daemon (a `sweepd run`/`demo` result)")
        if name == "report":
            p.add_argument("--plot", type=Path, metavar="FILE.png",
                           help="also write the sweep's plot (PNG) to this file")
            p.add_argument("--apply", type=Path, nargs="?", const=THE_CHECKOUT,
                           metavar="FILE",
                           help="write the optimum into this model config (one line of "
                                "MODEL.gpu.yml); xla-tuning: the recipe, guarded by "
                                "parallelism, into configs/MODEL.env.sh of the daemon's "
                                "submit.sh checkout (or this FILE)")
            p.add_argument("--force", action="store_true",
                           help="with --apply: write a conditional xla-tuning verdict too")
            p.add_argument("--commit", action="store_true",
                           help="with --apply: commit the file written in its repo (never on "
                                "the default branch)")
            md = p.add_argument("--tuning-md", type=Path, nargs="?", const=Path(),
                                metavar="PATH",
                                help="xla-tuning: write <MODEL_TAG>-tuning.md here (default: "
                                     "in the current directory); a file covering another "
                                     "parallelism is extended, with the sign-flip table; "
                                     "campaign: <MODEL_TAG>-campaign.md")
            md.complete = shtab.FILE  # type: ignore[attr-defined]
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
    add_view_commands(sub, common)


def _reconnect_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reconnect", type=float, default=RECONNECT_S, metavar="S",
                   help="when the daemon goes away (a restart), keep trying this many "
                        f"seconds, then exit {EXIT_CONNECTION_LOST} (default "
                        f"{RECONNECT_S:g})")


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", nargs="+", action="extend",
                   choices=[*(str(s) for s in SweepState), CANCELLED],
                   help="only sweeps in these states (cancelled: the aborted ones `cancel` "
                        "ended)")
    p.add_argument("--kind", nargs="+", action="extend", choices=sorted(kinds()),
                   help="only sweeps of these kinds")
    p.add_argument("--since", metavar="WHEN",
                   help="only sweeps submitted since: 45m, 2h, 3d ago or an ISO time (UTC)")
    p.add_argument("--mine", action="store_true", help="only the sweeps I submitted")
    p.epilog = ("newest first; ELAPSED and ETA are cluster time once a job was submitted "
                "(the scheduler's clock: the simulated cluster's runs faster than the wall's), "
                "else wall-clock time since submission; `show` names the base")
