"""The CLI's views around a sweep: a job's log, a dry run, the models, the daemon's status,
`watch` across a daemon restart, `--state-dir` reading, and shell completion.

Exit codes as in cli_client, and 5: `watch` lost the daemon and could not reconnect
within --reconnect seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import shtab
from rich.console import Console
from rich.text import Text

from sweepd.app.foreground import EXIT_FOR_STATE
from sweepd.app.joblog import JOB_ARG_HELP
from sweepd.app.progress import duration
from sweepd.cli.client import Client, ClientError
from sweepd.core.states import SweepState
from sweepd.util.text import compact_nodes, escape

EXIT_CONNECTION_LOST = 5
# Node states a job can start on at once; others are named in `validate`'s plan.
_USABLE = frozenset({"idle", "alloc", "mix"})
RECONNECT_S = 60.0
LOG_POLL_S = 1.0
# How `logs` shows each mark (joblog.mark); plain when the output is not a terminal.
LOG_STYLES = {"evidence": "bold reverse red", "signal": "yellow", "false_positive": "dim"}


def _json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), flush=True)


def _console() -> Console:
    # soft_wrap: a log line is never cut or folded; markup off: `[...]` in a log is text.
    return Console(highlight=False, markup=False, emoji=False, soft_wrap=True)


def client_for(args: argparse.Namespace) -> Client:
    """The daemon's socket, or with --state-dir the directory's database, read-only."""
    from sweepd.cli.offline import OfflineClient
    from sweepd.cli.output import socket_path

    state_dir: Path | None = getattr(args, "state_dir", None)
    if state_dir is not None:
        return OfflineClient(state_dir)
    return Client(socket_path(args))


def with_source(args: argparse.Namespace, body: Callable[[Client], int]) -> int:
    from sweepd.cli.output import print_error

    try:
        with client_for(args) as client:
            return body(client)
    except ClientError as e:
        return print_error(e, args)


# -- logs --------------------------------------------------------------------------------

# A log's own colours (SGR: ESC [ ... m): shown on a terminal, dropped elsewhere. A tab
# is layout (rich expands it to the next tab stop). Every other control character stays
# escaped (sweepd.util.text.escape).
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _escape_log(text: str) -> str:
    return "\t".join(escape(part) for part in text.split("\t"))


def log_text(line: Mapping[str, Any], terminal: bool = False) -> Text:
    text, style = str(line["text"]), LOG_STYLES.get(str(line["mark"]), "")
    if not terminal:
        return Text(_escape_log(_SGR.sub("", text)), style=style)
    kept = "".join(_escape_log(part) + (sgr.group() if sgr else "")
                   for part, sgr in _sgr_split(text))
    return Text.from_ansi(kept, style=style)


def _sgr_split(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """The text between SGR sequences, each with the sequence after it."""
    out: list[tuple[str, re.Match[str] | None]] = []
    start = 0
    for m in _SGR.finditer(text):
        out.append((text[start:m.start()], m))
        start = m.end()
    return [*out, (text[start:], None)]


def _log_header(args: argparse.Namespace, chunk: Mapping[str, Any]) -> str:
    scheduler = f"scheduler job {chunk['backend_id']}" if chunk.get("backend_id") \
        else "not yet given a scheduler job id"
    return (f"sweep {args.id} run #{chunk['run_seq']} attempt {chunk['attempt']}, "
            f"{scheduler} (sweepd job {chunk['job']}, {chunk['state']}): "
            f"{escape(str(chunk['path'] or 'no log file yet'))}")


def run_logs(args: argparse.Namespace) -> int:
    from sweepd.cli.output import fail, say

    def body(client: Client) -> int:
        console = _console()
        chunk = client.job_log(args.id, args.job, 0)
        if not args.json:
            say(_log_header(args, chunk), err=True)
        waiting = False
        while True:
            for line in chunk["lines"]:
                if args.json:
                    print(json.dumps(line, sort_keys=True), flush=True)
                else:
                    console.print(log_text(line, console.is_terminal))
            if chunk.get("not_started") and not waiting:
                waiting = True   # said once; with -f, wait for it to start
                say(f"sweep {args.id}: {chunk['missing']}"
                    + ("; waiting for it to start" if args.follow else ""), err=True)
            elif chunk.get("missing") and not chunk.get("not_started") and not args.follow:
                return fail(args, f"sweep {args.id}: {chunk['missing']}")
            if not chunk.get("more") and (not args.follow or chunk["ended"]):
                return 0
            if not chunk.get("more"):
                time.sleep(LOG_POLL_S)
            # By sweepd's own job number: the job the first answer named, whatever its id.
            chunk = client.job_log(args.id, f"id:{chunk['job']}", chunk["next_offset"])

    return with_source(args, body)


# -- validate / submit --dry-run ---------------------------------------------------------

def print_plan(plan: Mapping[str, Any]) -> None:
    from sweepd.cli.output import say

    where = ("" if "config" not in plan else
             f", config {escape(plan['config'])}" if plan["config"] else ", no config")
    say(f"spec OK: {plan['kind']} sweep \"{escape(plan['name'])}\" on {plan['node_count']} "
        f"nodes {escape(plan['nodes'])} (cluster backend: {plan['backend']}{where})")
    states = plan["node_states"]
    say("node states now: " + (", ".join(
        f"{len(nodes)} {state}" + ("" if state in _USABLE else f" ({compact_nodes(nodes)})")
        for state, nodes in sorted(states.items())) or "unknown (the scheduler did not answer)"))
    first = plan["first_plan"]
    names = {n["label"]: n for n in plan.get("job_names", [])}
    if "runs" in first:
        say(f"first plan ({len(first['runs'])} job(s)):")
        for run in first["runs"]:
            say(f"  {escape(run['label'])} on {escape(run['nodes'])}: {escape(run['reason'])}")
            named = names.get(run["label"])
            if named and named["carried"]:
                say(f"    its job name leaves out (carried, over 243 bytes with them): "
                    f"{escape(' '.join(named['carried']))}")
    else:
        say(f"first plan: {escape(str(first.get('finished') or first.get('stop')))}")
    most = plan["most_runs"]
    hours = plan["most_node_hours"]
    say(f"at most: {most if most is not None else 'no fixed number of'} runs, "
        f"{plan['most_jobs'] if plan['most_jobs'] is not None else 'as many'} jobs "
        f"(each run retried up to {plan['max_retries']} times), "
        + (f"{hours:g} node-hours ({escape(plan['node_hours_basis'])})" if hours is not None
           else f"node-hours {escape(plan['node_hours_basis'])}"))
    say("nothing was submitted")


def run_dry_run(args: argparse.Namespace) -> int:
    """`submit --dry-run`: the daemon's own answer (its cluster, its store)."""
    from sweepd.cli.output import fail, load_spec
    from sweepd.kinds.spec import SpecError

    try:
        spec = load_spec(args.spec)
    except SpecError as e:
        return fail(args, str(e), e.errors)

    def body(client: Client) -> int:
        plan = client.validate(spec)
        if args.json:
            _json(plan)
        else:
            print_plan(plan)
        return 0

    return with_source(args, body)


def run_validate(args: argparse.Namespace) -> int:
    """`validate`: the running daemon's answer when one answers on the socket (its cluster,
    its earlier jobs) and no --config/--scenario is given; else without a daemon, the
    daemon's checks against the config's cluster (the simulated one when there is no
    config) on a throwaway state directory. 0: the spec would be accepted; 2: why not."""
    from sweepd.cli.client import ClientError
    from sweepd.cli.offline import default_config, validate_spec
    from sweepd.cli.output import fail, load_spec, print_error
    from sweepd.config import ConfigError, load_config
    from sweepd.kinds.registry import read_spec_file
    from sweepd.kinds.spec import SpecError

    if args.config is None and args.scenario is None:
        try:
            spec = load_spec(args.spec)
        except SpecError as e:
            return fail(args, str(e), e.errors)
        try:
            with client_for(args) as client:
                plan = client.validate(spec)
        except ClientError as e:
            if e.status != 0:   # the daemon answered: its word
                return print_error(e, args)
        else:
            if args.json:
                _json(plan)
            else:
                print_plan(plan)
            return 0
    path = args.config or default_config()
    try:
        config = load_config(path, {"cluster.sim": {"scenario": str(args.scenario)}}
                             if args.scenario else None)
        plan = validate_spec(read_spec_file(args.spec), config)
    except SpecError as e:
        return fail(args, str(e), e.errors)
    except (ConfigError, ValueError, OSError, RuntimeError) as e:
        # The cluster could not be set up from the config (a missing command, a bad
        # setting): a config problem, said in one line.
        return fail(args, f"cannot check against {path or 'the simulated cluster'}: {e}")
    plan["config"] = str(path) if path else None
    if args.json:
        _json(plan)
    else:
        print_plan(plan)
    return 0


# -- models, status ----------------------------------------------------------------------

_MODEL_COLUMNS = [("name", "MODEL"), ("params_b", "PARAMS (B)"), ("active_b", "ACTIVE (B)"),
                  ("layers", "LAYERS"), ("d_model", "D_MODEL"), ("experts", "EXPERTS"),
                  ("seq_len", "SEQ"), ("min_nodes", "MIN NODES")]


def run_models(args: argparse.Namespace) -> int:
    from sweepd.cli.output import format_table, say

    def body(client: Client) -> int:
        out = client.models()
        if args.json:
            _json(out)
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
            _json(s)
        else:
            say("\n".join(status_lines(s)))
        return 0

    return with_source(args, body)


# -- watch, across restarts --------------------------------------------------------------

def _progress_key(p: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(p[k] for k in ("runs_started", "runs_done", "jobs_queued", "jobs_running"))


class Watcher:
    """Prints a sweep's progress lines from event `after` on; on a lost connection it
    reconnects and resumes after the last line it printed: no gap, no repeat."""

    def __init__(self, args: argparse.Namespace, sweep_id: int) -> None:
        from sweepd.cli.output import socket_path

        self.args = args
        self.sweep_id = sweep_id
        self.socket = socket_path(args)
        self.last = 0
        self.shown: tuple[Any, ...] | None = None   # set once the daemon first answered

    def _event(self, client: Client, event: Mapping[str, Any]) -> None:
        from sweepd.cli.output import say

        # The daemon may go between receiving the event and printing it: `last` moves only
        # once it is printed, so a reconnect fetches it again (no gap).
        progress = client.show(self.sweep_id)["progress"]
        if self.args.json:
            print(json.dumps({**event, "progress": progress}, sort_keys=True), flush=True)
        else:
            say(event["reason"])
            if _progress_key(progress) != self.shown:
                self.shown = _progress_key(progress)
                say(f"  ({progress['line']})")
        self.last = int(event["id"])

    def _pass(self) -> dict[str, Any] | None:
        """One connection: lines until the stream ends, then the sweep's summary; None when
        the connection was lost."""
        try:
            with Client(self.socket) as client:
                if self.shown is None:   # what the sweep had before this watch began
                    self.shown = _progress_key(client.show(self.sweep_id)["progress"])
                for event in client.stream(self.sweep_id, self.last):
                    self._event(client, event)
                return client.show(self.sweep_id)
        except ClientError as e:
            if e.status != 0 or self.shown is None:   # never reached: not a restart
                raise
            return None

    def run(self) -> int:
        from sweepd.cli.output import fail, say

        lost_at: float | None = None
        while True:
            summary = self._pass()
            if summary is not None and SweepState(summary["state"]) in EXIT_FOR_STATE:
                if not self.args.json:
                    say(f"sweep {summary['id']}: {summary['state']}"
                        + (f" ({escape(summary['reason'])})" if summary.get("reason") else "")
                        + f" · {summary['progress']['line']}")
                return EXIT_FOR_STATE[SweepState(summary["state"])]
            now = time.monotonic()
            if lost_at is None:
                lost_at = now
                say(f"sweepd: lost the daemon at {self.socket}; reconnecting (up to "
                    f"{self.args.reconnect:g}s)", err=True)
            elif now - lost_at > self.args.reconnect:
                return fail(self.args, f"lost the connection to sweepd at {self.socket} and "
                            f"could not reconnect within {self.args.reconnect:g}s",
                            code=EXIT_CONNECTION_LOST)
            if summary is not None:
                lost_at = None   # the daemon answered: only a closed stream (restart)
            time.sleep(0.2)


def watch(args: argparse.Namespace, sweep_id: int) -> int:
    from sweepd.cli.output import print_error

    try:
        return Watcher(args, sweep_id).run()
    except ClientError as e:
        return print_error(e, args)


# -- completion --------------------------------------------------------------------------

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
        _json({"shell": args.shell, "script": script})
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


def add_view_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                      common: argparse.ArgumentParser) -> None:
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
    p = sub.add_parser("validate", parents=[common], help="check a spec and print its plan "
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
                        "against (default: $SWEEPD_CONFIG, else /etc/sweepd/sweepd.toml if "
                        "it exists, else the simulated cluster)")
    p.add_argument("--scenario", type=Path, default=None,
                   help="the simulated cluster's scenario (as `sweepd run --scenario`)")
    p.set_defaults(func=run_validate)
    for name, func, text in (("models", run_models, "the models sweepd knows, and their "
                              "shapes"),
                             ("status", run_status, "the daemon's version, uptime, backend "
                              "and queues")):
        sub.add_parser(name, parents=[common], help=text, description=text).set_defaults(
            func=func)
    p = sub.add_parser("completion", parents=[common], help="print a shell completion script",
                       description="eval \"$(sweepd completion bash)\", or for zsh put "
                                   "`sweepd completion zsh` in a file named _sweepd on $fpath")
    p.add_argument("shell", choices=["bash", "zsh"])
    p.set_defaults(func=run_completion)
    p = sub.add_parser("_ids", parents=[common])   # for completion: not in the verb list
    p.set_defaults(func=run_ids)


def sweep_id_arg(p: argparse.ArgumentParser) -> None:
    action = p.add_argument("id", type=int, help="sweep id")
    action.complete = SWEEP_ID_COMPLETE  # type: ignore[attr-defined]


def state_dir_verbs() -> Sequence[str]:
    return ("report", "explain")
