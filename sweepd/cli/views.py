"""The CLI's views around a sweep: `models` and `status`, and the parsers of every view verb
(`logs`, `validate`, `models`, `status`, `completion`, `_ids`). The views themselves live in
cli/logs.py, cli/validate.py, cli/watch.py and cli/completion.py; cli/source.py says where
they read from.

Exit codes as in cli_client, and 5: `watch` lost the daemon and could not reconnect
within --reconnect seconds (cli/watch.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import shtab

from sweepd.app.joblog import JOB_ARG_HELP
from sweepd.app.progress import duration
from sweepd.cli.client import Client
from sweepd.cli.completion import run_completion, run_ids, sweep_id_arg
from sweepd.cli.dashboard import add_dashboard_command
from sweepd.cli.logs import run_logs
from sweepd.cli.source import print_json, with_source
from sweepd.cli.validate import run_validate
from sweepd.util.text import escape

_MODEL_COLUMNS = [("name", "MODEL"), ("params_b", "PARAMS (B)"), ("active_b", "ACTIVE (B)"),
                  ("layers", "LAYERS"), ("d_model", "D_MODEL"), ("experts", "EXPERTS"),
                  ("seq_len", "SEQ"), ("min_nodes", "MIN NODES")]


def run_models(args: argparse.Namespace) -> int:
    from sweepd.cli.output import format_table, say

    def body(client: Client) -> int:
        out = client.models()
        if args.json:
            print_json(out)
            return 0
        say(format_table(out["models"], _MODEL_COLUMNS))
        if out["configs"] is not None:
            say("\nthe repo's model configs (configs/*.gpu.yml):")
            say("\n".join(f"  {escape(c)}" for c in out["configs"]) or "  (none)")
        return 0

    return with_source(args, body)


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"


def status_lines(s: Mapping[str, Any]) -> list[str]:
    reach = ("reachable" if s["backend_reachable"] else "UNREACHABLE") + (
        f" ({escape(s['backend_problem'])})" if s.get("backend_problem") else "")
    last = ("none yet" if s["last_pass_ago_s"] is None
            else f"{duration(s['last_pass_ago_s'])} ago")
    return [f"sweepd {s['version']}, up {duration(s['uptime_s'])}",
            f"backend: {s['backend']}, {reach}",
            f"sweeps: {_counts(s['sweeps'])}",
            f"jobs: {_counts(s['jobs'])}",
            f"telegram: {'on' if s['telegram'] else 'off (messages go to the log)'}, "
            f"{s['delivery_backlog']} message(s) waiting",
            f"last engine pass: {last}"]


def run_status(args: argparse.Namespace) -> int:
    from sweepd.cli.output import say

    def body(client: Client) -> int:
        s = client.status()
        if args.json:
            print_json(s)
        else:
            say("\n".join(status_lines(s)))
        return 0

    return with_source(args, body)


def add_view_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                      common: argparse.ArgumentParser, bare: argparse.ArgumentParser) -> None:
    """`common`: --socket, --json and --config; `bare`: without --config."""
    state_dir = argparse.ArgumentParser(add_help=False)
    state_dir.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                           help="read this state directory's database (read-only) instead "
                                "of asking the daemon (a `sweepd run`/`demo` result)")
    p = sub.add_parser("logs", parents=[common, state_dir], help="print or follow a job's log",
                       description="a job's log: false positives dimmed, the failure's "
                                   "evidence highlighted")
    sweep_id_arg(p)
    p.add_argument("job", nargs="?", metavar="RUN|JOBID", help=JOB_ARG_HELP)
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines until the job ends")
    p.set_defaults(func=run_logs)
    # Its own --config: what it checks against, and the socket's.
    p = sub.add_parser("validate", parents=[bare], help="check a spec and print its plan "
                       "(no daemon needed)",
                       description="check a spec as a submission would (the kind's checks, "
                                   "what it refers to, the pre-flight, the first plan, each "
                                   "first job's name against submit.sh's 243-byte limit) and "
                                   "print the plan, without a daemon; nothing is submitted. "
                                   "Exit 0: it would be accepted; 2: why not, in one line")
    spec = p.add_argument("spec", type=Path, help="sweep spec (YAML or JSON)")
    spec.complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--config", type=Path, default=None,
                   help="the daemon's TOML settings, whose cluster the spec is checked "
                        "against, without asking a daemon (default: the daemon on the found "
                        "config's socket if one answers, else that config: $SWEEPD_CONFIG, "
                        "else the one `sweepd init` wrote, else /etc/sweepd/sweepd.toml, else "
                        "the simulated cluster)")
    p.add_argument("--scenario", type=Path, default=None,
                   help="the simulated cluster's scenario (as `sweepd run --scenario`)")
    p.set_defaults(func=run_validate)
    for name, func, text in (("models", run_models, "the models sweepd knows, and their "
                              "shapes"),
                             ("status", run_status, "the daemon's version, uptime, backend "
                              "and queues")):
        sub.add_parser(name, parents=[common], help=text, description=text).set_defaults(
            func=func)
    add_dashboard_command(sub, common)
    p = sub.add_parser("completion", parents=[common], help="print a shell completion script",
                       description="eval \"$(sweepd completion bash)\", or for zsh put "
                                   "`sweepd completion zsh` in a file named _sweepd on $fpath")
    p.add_argument("shell", choices=["bash", "zsh"])
    p.set_defaults(func=run_completion)
    p = sub.add_parser("_ids", parents=[common])   # for completion: not in the verb list
    p.set_defaults(func=run_ids)


def state_dir_verbs() -> Sequence[str]:
    return ("report", "explain", "compare")
