"""`sweepd dashboard`: the URL of the daemon's read-only dashboard, with its token (the
config's `[web] listen`; the token from the state directory), and the SSH tunnel that
reaches it from another machine."""

from __future__ import annotations

import argparse

from sweepd.cli.output import fail, print_json, say
from sweepd.config import ConfigError, find_config, load_config
from sweepd.web.server import dashboard_url
from sweepd.web.token import ensure_token


def run_dashboard(args: argparse.Namespace) -> int:
    path = find_config(getattr(args, "config", None))
    try:
        config = load_config(path)
    except ConfigError as e:
        return fail(args, str(e))
    if config.web.listen is None:
        return fail(args, f"the dashboard is off: set [web] listen = \"127.0.0.1:8765\" in "
                          f"{path or 'the daemon config'} and restart the daemon")
    try:
        token = ensure_token(config.daemon.state_dir)
    except (OSError, ValueError) as e:
        return fail(args, f"cannot read the dashboard's token in {config.daemon.state_dir}: "
                          f"{getattr(e, 'strerror', None) or e} (run this as the daemon's user)")
    where = dashboard_url(config.web, token)
    if getattr(args, "json", False):
        print_json(where)
        return 0
    say(where["url"])
    say(f"from another machine: {where['tunnel']}, then open the URL there", err=True)
    return 0


def add_dashboard_command(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                          common: argparse.ArgumentParser) -> None:
    text = "print the URL of the daemon's read-only dashboard (with its token)"
    sub.add_parser("dashboard", parents=[common], help=text,
                   description=text).set_defaults(func=run_dashboard)
