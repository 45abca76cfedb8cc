"""`sweepd report`: a sweep's report (Markdown, or --json), its plot written with --plot, and
the kind's own client action on it (`--apply`, `--tuning-md`: `ClientHooks`), whose flags
each kind declares (`ClientHooks.report_flags`); with --state-dir read from a state
directory without a daemon."""

from __future__ import annotations

import argparse
import csv
import functools
import sys
from pathlib import Path
from typing import Any

import shtab

from sweepd.cli.client import Client
from sweepd.cli.output import fail, print_json, say
from sweepd.cli.source import with_source
from sweepd.kinds.registry import ClientOutput, ReportFlag, kinds
from sweepd.reports.run_table import COLUMNS
from sweepd.web.page import render_page


def run_report(args: argparse.Namespace) -> int:
    return with_source(args, functools.partial(_report, args))


def _report(args: argparse.Namespace, client: Client) -> int:
    if any(getattr(args, f.dest, None) is not None for f, _ in kind_flags() if f.acts):
        return _report_action(args, client.reads.report(args.id)["json"])
    if args.plot is not None:
        code = _write_plot(args, client)
        if code:
            return code
    if args.html is not None:
        return _write_html(args, client)
    if args.csv:
        write_csv(client.reads.report(args.id)["json"].get("runs") or [])
    elif args.json:
        print_json(client.reads.report(args.id)["json"])
    else:
        say(client.reads.report_markdown(args.id), end="")
    return 0


def write_csv(rows: list[dict[str, Any]]) -> None:
    """One row per run (reports/run_table.py), a header first; spreadsheet-ready."""
    out = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, extrasaction="ignore",
                         lineterminator="\n")
    out.writeheader()
    out.writerows(rows)


def _report_action(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """An acting flag (`--apply`, `--tuning-md`): the sweep's kind writes what it has
    (`ClientHooks`), when it takes every acting flag given."""
    kind = report["sweep"]["kind"]
    hooks = kinds()[kind].client if kind in kinds() else None
    takes = hooks.flags if hooks is not None and hooks.report_action is not None else set()
    refused = [(f, parts) for f, parts in kind_flags()
               if f.acts and getattr(args, f.dest, None) is not None and f.dest not in takes]
    refused.sort(key=lambda r: r[0].dest == "apply")   # the kind-specific refusal first
    if refused:
        flag, parts = refused[0]
        if flag.dest == "apply":
            return fail(args, f"sweep {args.id} has no optimum to apply")
        writers = " or ".join(k for k, _ in parts)
        return fail(args, f"sweep {args.id} is a {kind} sweep: {flag.name} is for {writers} "
                          "sweeps only")
    assert hooks is not None and hooks.report_action is not None   # it takes the flags given
    return hooks.report_action(args, report, ClientOutput(fail, say, print_json))


@functools.cache
def kind_flags() -> tuple[tuple[ReportFlag, tuple[tuple[str, str], ...]], ...]:
    """Every kind's report flags, one entry per name, in the kinds' order: the flag as its
    first kind declared it, and each declaring kind's (name, help). Kinds that share a flag
    must give it the same shape: argparse holds one."""
    merged: dict[str, tuple[ReportFlag, list[tuple[str, str]]]] = {}
    for name, kind in sorted(kinds().items()):
        for flag in kind.client.report_flags:
            first, parts = merged.setdefault(flag.name, (flag, []))
            if _shape(flag) != _shape(first):
                raise ValueError(f"kind {name} declares report flag {flag.name} unlike kind "
                                 f"{parts[0][0]}: {_shape(flag)} != {_shape(first)}")
            parts.append((name, flag.help))
    return tuple((flag, tuple(parts)) for flag, parts in merged.values())


def _shape(flag: ReportFlag) -> tuple[bool, dict[str, Any], bool]:
    return flag.acts, dict(flag.options), flag.completes_files


def flag_help(parts: tuple[tuple[str, str], ...]) -> str:
    """A shared flag's help: each kind's part after the kinds that give it."""
    by_text: dict[str, list[str]] = {}
    for kind, text in parts:
        by_text.setdefault(text, []).append(kind)
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in by_text.items())


def _plot_problem(path: Path) -> str | None:
    """Why `path` cannot take the file (the plot, the page), known before the daemon is asked."""
    if path.is_dir():
        return "it is a directory"
    if not path.parent.is_dir():
        return f"there is no directory {path.parent}"
    return None


def _write_plot(args: argparse.Namespace, client: Client) -> int:
    path: Path = args.plot
    problem = _plot_problem(path)
    if problem is None:
        png = client.reads.plot(args.id)
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


def _write_html(args: argparse.Namespace, client: Client) -> int:
    """The sweep's page as one self-contained HTML file (`sweepd/web/page.py`)."""
    path: Path = args.html
    problem = _plot_problem(path)
    if problem is None:
        try:
            path.write_text(render_page(client.reads.page(args.id)), "utf-8")
        except OSError as e:
            problem = e.strerror or type(e).__name__
    if problem is not None:
        return fail(args, f"cannot write the page to {path}: {problem}")
    say(f"page written to {path}", err=True)
    return 0


def report_args(p: argparse.ArgumentParser) -> None:
    """`report`'s own options (beyond the sweep id and --state-dir), and every kind's."""
    p.add_argument("--csv", action="store_true",
                   help="one CSV row per run: run, value(s), job id, nodes, state, failure "
                        "class, TGS, MFU, memory, start, end, node-hours")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also write the sweep's plot (PNG) to this file")
    p.add_argument("--html", type=Path, metavar="FILE.html",
                   help="write the sweep's page to this file: one self-contained HTML file "
                        "(verdict, chart, report, runs, timeline; nothing to fetch)")
    for flag, parts in kind_flags():
        arg = p.add_argument(flag.name, help=flag_help(parts), **flag.options)
        if flag.completes_files:
            arg.complete = shtab.FILE  # type: ignore[attr-defined]
