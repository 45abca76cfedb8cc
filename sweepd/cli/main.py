"""The command line: `serve`, `run`, `demo`, and the client verbs of a running daemon."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import yaml

from sweepd.api.errors import AnotherSweepd
from sweepd.app import foreground
from sweepd.app.health import version
from sweepd.cli.output import CONFIG_HELP, SOCKET_HELP, load_spec, print_spec_error, say
from sweepd.cli.progress_bar import live_bar
from sweepd.config import Config, ConfigError, find_config, load_config
from sweepd.kinds.registry import kind_of, kinds
from sweepd.kinds.spec import SpecError
from sweepd.sim.scenario import ScenarioError
from sweepd.util import logs


def _config(args: argparse.Namespace, overrides: dict[str, Any], found: bool = True) -> Config:
    """--config, else (`found`) the config found where `sweepd init` and the systemd unit
    put one."""
    extra = {k: v for k, v in overrides.items() if v is not None}
    return load_config(find_config(args.config) if found else args.config, extra)


def cmd_serve(args: argparse.Namespace) -> int:
    from sweepd.api.server import FRONT
    from sweepd.app.daemon import run_daemon

    logs.configure(args.log_level)   # JSON for journald, readable in a terminal
    # `sweepd --socket PATH serve` serves there, as the client verbs would look there.
    return run_daemon(_config(args, {"daemon.socket": args.socket and str(args.socket)}),
                      FRONT)


def _foreground_config(args: argparse.Namespace, scenario: Path | None,
                       found: bool) -> Config:
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="sweepd-run-"))
    return _config(args, {"daemon.state_dir": str(state_dir), "daemon.tick_s": args.tick,
                          "cluster.sim": {"scenario": str(scenario)} if scenario else None},
                   found)


def _run_sweep(args: argparse.Namespace, config: Config, spec: dict[str, Any],
               kept: bool = True) -> int:
    """One sweep in the foreground: on a terminal under a live progress bar
    (cli/progress_bar.py), else its plain lines."""
    with live_bar(getattr(args, "json", False)) as bar:
        if bar is None:
            return asyncio.run(foreground.run_sweep(config, spec, say, kept=kept))
        return asyncio.run(foreground.run_sweep(config, spec, bar.say, kept=kept,
                                                tell=bar.err, on_progress=bar.update))


def _foreground(args: argparse.Namespace, spec: dict[str, Any], scenario: Path | None) -> int:
    logs.configure("warning", json=False)
    # A scenario is the simulated cluster's: with one, only a named config is used.
    config = _foreground_config(args, scenario, found=scenario is None)
    return _run_sweep(args, config, spec)


def cmd_run(args: argparse.Namespace) -> int:
    # Its config's toolkit repo may define the model: the foreground daemon judges it.
    # What a submission sends (only what the spec sets: a default such as an empty `nodes`
    # beside a `node_count` slot would read as the spec's own).
    return _foreground(args, load_spec(args.spec), args.scenario)


def cmd_demo(args: argparse.Namespace) -> int:
    """The kind's demo (found through the registry): its specs in turn, then its truth."""
    logs.configure("warning", json=False)
    demo = kind_of(args.kind).demo
    if demo is None:   # argparse offers only kinds with a demo
        raise SystemExit(f"sweep kind {args.kind} has no demo")
    print(demo.header)
    # The demo is the embedded simulated cluster's, whatever config `init` wrote.
    config = _foreground_config(args, demo.scenario, found=False)
    temporary = args.state_dir is None   # a demo made it for itself: it removes it
    code = 0
    try:
        for spec in demo.specs:
            code = _run_sweep(args, config, spec, kept=not temporary)
            if code:
                break
        if demo.truth:
            print(asyncio.run(demo.truth(config)))
    finally:
        if temporary:
            shutil.rmtree(config.daemon.state_dir, ignore_errors=True)
    return code


class UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse's refusal raised, not printed, so that with --json it is JSON too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def _usage_error(e: UsageError, argv: list[str]) -> int:
    if "--json" in argv:
        from sweepd.cli.output import fail

        return fail(argparse.Namespace(json=True), f"{e.parser.prog}: {e.message}")
    e.parser.print_usage(sys.stderr)
    print(f"{e.parser.prog}: error: {e.message}", file=sys.stderr)
    return foreground.EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(prog="sweepd", description=__doc__)
    # Before the verb too: `sweepd --socket PATH --json list` as well as after the verb
    # (there they default to SUPPRESS, so as not to reset what was given before it).
    parser.add_argument("--socket", type=Path, default=None, help=SOCKET_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output "
                        "(the client verbs)")
    parser.add_argument("--version", action="version", version=f"sweepd {version()}")
    parser.set_defaults(parser_factory=build_parser)   # for `completion`
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the daemon")
    p.add_argument("--config", type=Path, help=CONFIG_HELP)
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"], help="default: info")
    p.set_defaults(func=cmd_serve)

    for name, func, helptext in (("run", cmd_run, "run one sweep in the foreground"),
                                 ("demo", cmd_demo, "a sweep on the embedded simulated cluster")):
        p = sub.add_parser(name, help=helptext,
                           epilog="exit codes: 0 verdict reached, 2 bad input, 3 stopped for a "
                                  "person's decision, 4 failed or aborted, 130 interrupted "
                                  "(Ctrl-C), 143 SIGTERM, 129 SIGHUP: each cancels the "
                                  "sweep's jobs and says so on stderr; a second one leaves "
                                  "at once)")
        if name == "demo":
            p.add_argument("--kind", default="model-perf",
                           choices=[n for n, k in kinds().items() if k.demo],
                           help="which sweep to show, each with a seeded fault")
        if name == "run":
            p.add_argument("spec", type=Path, help="sweep spec (YAML or JSON)")
            p.add_argument("--scenario", type=Path, help="simulated cluster scenario (YAML)")
        p.add_argument("--config", type=Path, help="TOML settings file")
        p.add_argument("--state-dir", type=Path, help="keep the database and logs here")
        p.add_argument("--tick", type=float, default=0.05, help="wall seconds between passes")
        p.set_defaults(func=func)

    from sweepd.cli.parse_log import add_parse_command
    from sweepd.cli.setup import add_setup_commands
    from sweepd.cli.verbs import add_client_commands

    add_client_commands(sub)
    add_setup_commands(sub)
    add_parse_command(sub)
    add_top_command(sub)
    # Helper verbs (`_ids`, for completion) work but are not offered in the usage line.
    sub.metavar = "{" + ",".join(n for n in sub.choices if not n.startswith("_")) + "}"
    return parser


def cmd_top(args: argparse.Namespace) -> int:
    from sweepd.cli.output import socket_path, with_client

    def check_then_run(client: Any) -> int:
        client.health()   # a clear "not running" before the screen takes the terminal
        from sweepd.cli.top import run_top

        return run_top(socket_path(args))

    return with_client(args, check_then_run)


def add_top_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("top", help="a live view of the sweeps (q quits)",
                       description="A live view of the daemon's sweeps: state, progress, TGS, "
                                   "the latest line; the selected sweep's runs and stop "
                                   "message. Keys: e explain, r report, u resume, a abort "
                                   "(each asks first), q quit.")
    p.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    p.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=CONFIG_HELP)
    p.set_defaults(func=cmd_top)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
    except UsageError as e:
        return _usage_error(e, argv)
    try:
        return int(args.func(args))
    except SpecError as e:
        print_spec_error(e)
        return foreground.EXIT_BAD_INPUT
    except (ConfigError, yaml.YAMLError, ScenarioError) as e:
        say(f"sweepd: {e}", err=True)
        return foreground.EXIT_BAD_INPUT
    except AnotherSweepd as e:
        say(f"sweepd: {e}", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `sweepd list | head`: the reader left. Point stdout at /dev/null so the
        # interpreter's final flush does not print a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
