"""`sweepd report`: a sweep's report (Markdown, or --json), its plot written with --plot, and
the kind's own client action on it (`--apply`, `--tuning-md`: `ClientHooks`); with
--state-dir read from a state directory without a daemon."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

import shtab

from sweepd.cli.client import Client
from sweepd.cli.output import fail, print_json, say
from sweepd.cli.source import with_source
from sweepd.kinds.registry import THE_CHECKOUT, ClientOutput, kinds


def run_report(args: argparse.Namespace) -> int:
    return with_source(args, functools.partial(_report, args))


def _report(args: argparse.Namespace, client: Client) -> int:
    if args.tuning_md is not None or args.apply is not None:
        return _report_action(args, client.reads.report(args.id)["json"])
    if args.plot is not None:
        code = _write_plot(args, client)
        if code:
            return code
    if args.json:
        print_json(client.reads.report(args.id)["json"])
    else:
        say(client.reads.report_markdown(args.id), end="")
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


def report_args(p: argparse.ArgumentParser) -> None:
    """`report`'s own options (beyond the sweep id and --state-dir)."""
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
