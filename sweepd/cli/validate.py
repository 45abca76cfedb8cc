"""`sweepd validate` and `submit --dry-run`: a spec checked as a submission would be (by the
running daemon, or without one against the config's cluster) and its plan printed;
nothing is submitted."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sweepd.cli.client import Client
from sweepd.cli.source import client_for, print_json, with_source
from sweepd.util.text import compact_nodes, escape

# Node states a job can start on at once; others are named in `validate`'s plan.
_USABLE = frozenset({"idle", "alloc", "mix"})


def print_plan(plan: Mapping[str, Any]) -> None:
    from sweepd.cli.output import say

    # Which config the checks ran against: the running daemon's, or the one found here.
    where = (f", config {escape(plan['config'])}" if plan.get("config") else
             f", the daemon on {escape(plan['daemon'])}" if plan.get("daemon") else
             ", no config" if "config" in plan else "")
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
    runs = (f"{most} runs, {plan['most_jobs']} jobs (each run retried up to "
            f"{plan['max_retries']} times)" if most is not None else
            f"no fixed number of runs ({escape(plan.get('runs_unbounded') or 'not bounded')})"
            ", as many jobs as the node-hour cap allows")
    say(f"at most: {runs}, "
        + (f"{hours:g} node-hours ({escape(plan['node_hours_basis'])})" if hours is not None
           else f"node-hours {escape(plan['node_hours_basis'])}")
        # The hard cap a sweep stops at, whatever the most is (core/cost_cap.py).
        + ("" if "node_hour_cap" not in plan else
           f"; stops at its node-hour cap {plan['node_hour_cap']:g} "
           f"({escape(plan['node_hour_cap_basis'])})"))
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
        plan["daemon"] = str(client.socket_path)   # whose config it was checked against
        if args.json:
            print_json(plan)
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
    from sweepd.cli.offline import validate_spec
    from sweepd.cli.output import fail, load_spec, print_error
    from sweepd.config import ConfigError, find_config, load_config
    from sweepd.kinds.parse import read_spec_file
    from sweepd.kinds.spec import SpecError

    if args.config is None and args.scenario is None:
        try:
            spec = load_spec(args.spec)
        except SpecError as e:
            return fail(args, str(e), e.errors)
        try:
            with client_for(args) as client:
                plan = client.validate(spec)
                plan["daemon"] = str(client.socket_path)
        except ClientError as e:
            if e.status != 0:   # the daemon answered: its word
                return print_error(e, args)
        else:
            if args.json:
                print_json(plan)
            else:
                print_plan(plan)
            return 0
    path = find_config(args.config)
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
        print_json(plan)
    else:
        print_plan(plan)
    return 0
