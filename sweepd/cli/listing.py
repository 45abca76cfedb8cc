"""`sweepd list`: the daemon's sweeps, newest first, in short cells (`4/≤12`, `1q 2r`, `12m`,
`≤30m?`), filtered by state (`cancelled`: the aborts `cancel` made), kind, age and user."""

from __future__ import annotations

import argparse
import os
import pwd
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sweepd.app.progress import duration
from sweepd.cli.client import Client
from sweepd.cli.output import fail, format_table, print_json, runs_cell, say, with_client
from sweepd.kinds.registry import kinds
from sweepd.kinds.spec import SpecError
from sweepd.store.states import SweepState

_LIST_COLUMNS = [("id", "ID"), ("state", "STATE"), ("kind", "KIND"), ("runs", "RUNS"),
                 ("jobs", "JOBS"), ("elapsed", "ELAPSED"), ("eta", "ETA"),
                 ("submitted_by", "USER"), ("updated_at", "UPDATED"), ("name", "NAME")]


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


def list_args(p: argparse.ArgumentParser) -> None:
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
