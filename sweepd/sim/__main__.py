"""`python -m sweepd.sim train|header|summary ...`: the simulated trainer's command line.

    train   --scenario FILE --model M --job-id ID --job-name NAME [--nodes HOSTLIST]
            [--all-ranks --log FILE] [--commit C] [--state-dir DIR] [--exit-file FILE]
            -- key=value ... _env_K=V ...
    header  --job-id ID --job-name NAME --model M --nodes HOSTLIST -- passthrough...
    summary --job-id ID --job-name NAME --model M --nodes HOSTLIST --exit RC --wall SECONDS
            [--failure TEXT]

Without --all-ranks, train is one rank under `srun -l`: rank from SLURM_PROCID, node list
from SLURM_JOB_NODELIST when --nodes is absent. The job's ranks share one plan: the first to
take the job's lock plans it and leaves it in the state directory, the others play it without
importing the scenario (most of a rank's CPU).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import hostlist

from sweepd.sim import logfmt
from sweepd.sim.player import JobMeta, run_all_ranks, run_one_rank
from sweepd.sim.statefiles import atomic_write_json, atomic_write_text, locked, read_json
from sweepd.sim.timeline import Plan, from_json, to_json


def default_state_dir(scenario: Path) -> Path:
    digest = hashlib.sha1(str(scenario.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"sweepd-sim-{digest}"


def _job_args(parser: argparse.ArgumentParser, nodes_required: bool) -> None:
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--nodes", required=nodes_required)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweepd.sim")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="run a simulated training job")
    _job_args(train, nodes_required=False)
    train.add_argument("--scenario", type=Path, required=True)
    train.add_argument("--all-ranks", action="store_true")
    train.add_argument("--log", type=Path)
    train.add_argument("--commit")
    train.add_argument("--state-dir", type=Path)
    train.add_argument("--exit-file", type=Path,
                       help="write the exit code here (atomically) when the job ends")
    train.add_argument("--cluster-start", type=float,
                       help="when the simulated cluster started the job, on its own clock")
    train.add_argument("--clock-file", type=Path,
                       help="write the job's end on the cluster's clock here")
    _job_args(sub.add_parser("header", help="print the log header"), nodes_required=True)
    summary = sub.add_parser("summary", help="print the JOB SUMMARY block")
    _job_args(summary, nodes_required=True)
    summary.add_argument("--exit", type=int, required=True, dest="exit_code")
    summary.add_argument("--wall", type=float, required=True)
    summary.add_argument("--failure")
    return parser


def _plan(args: argparse.Namespace, state_dir: Path, nodes: tuple[str, ...],
          passthrough: list[str]) -> tuple[Plan, JobMeta, float]:
    """The job's plan, its meta (the model a per-job config names) and the time scale."""
    from sweepd.sim.scenario import ScenarioError, load_scenario  # the costly imports
    from sweepd.sim.trainer import plan_command

    try:
        scenario = load_scenario(args.scenario)
        meta = JobMeta(args.job_id, args.job_name, args.model, nodes, tuple(passthrough))
        plan, meta = plan_command(scenario, state_dir, meta, args.commit, os.environ, args.log)
    except (ScenarioError, ValueError) as exc:
        raise SystemExit(str(exc)) from exc
    return plan, meta, scenario.cluster.time_scale


FRESH_PLAN_S = 300.0   # a job's ranks start together: an older plan is an earlier job's


# The environment a rank of a job sees alike but for these: its own rank and place.
_PER_RANK = ("SLURM", "PMI", "PMIX", "OMPI", "HOSTNAME")


def _shared_plan(args: argparse.Namespace, argv: list[str], nodes: tuple[str, ...],
                 passthrough: list[str]) -> tuple[Plan, float]:
    """One plan for all of a job's ranks. Keyed by the job: its id and restart count, its
    whole command line and the environment planning may read (all but each rank's own
    variables; a rank that saw another would plan itself, not take a wrong plan). Taken only
    when fresh: a cluster started again numbers its jobs from 1 again."""
    state_dir = args.state_dir or default_state_dir(args.scenario)
    env = sorted((k, v) for k, v in os.environ.items() if not k.startswith(_PER_RANK))
    job = "\0".join([*argv, *nodes, *(f"{k}={v}" for k, v in env)]).encode()
    key = (f"{args.job_id}-{os.environ.get('SLURM_RESTART_COUNT', '0')}-"
           f"{hashlib.sha1(job).hexdigest()[:16]}")
    path = state_dir / "plans" / f"{key}.plan"
    with locked(state_dir / "plans" / f"{key}.lock"):
        shared = read_json(path)
        if shared is not None and time.time() - path.stat().st_mtime < FRESH_PLAN_S:
            return from_json(shared["plan"]), shared["time_scale"]
        plan, _, scale = _plan(args, state_dir, nodes, passthrough)
        atomic_write_json(path, {"plan": to_json(plan), "time_scale": scale})
    return plan, scale


def _train(args: argparse.Namespace, argv: list[str], passthrough: list[str]) -> int:
    if args.all_ranks and args.log is None:
        raise SystemExit("--all-ranks needs --log FILE")
    nodelist = args.nodes or os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise SystemExit("--nodes is required outside Slurm (no SLURM_JOB_NODELIST)")
    nodes = tuple(hostlist.expand_hostlist(nodelist))
    if args.all_ranks:
        plan, meta, scale = _plan(args, args.state_dir or default_state_dir(args.scenario),
                                  nodes, passthrough)
        return run_all_ranks(plan, meta, args.log, scale, args.cluster_start, args.clock_file)
    plan, scale = _shared_plan(args, argv, nodes, passthrough)
    rank = int(os.environ.get("SLURM_PROCID", "0"))
    return run_one_rank(plan, nodes, rank, scale)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = _parser().parse_args(argv[:cut])
    passthrough = argv[cut + 1:]
    if args.command == "header":
        nodes = hostlist.expand_hostlist(args.nodes)
        lines = logfmt.header_lines(args.job_id, args.job_name, args.model, nodes, passthrough)
    elif args.command == "summary":
        nodes = hostlist.expand_hostlist(args.nodes)
        lines = logfmt.summary_lines(args.job_id, args.job_name, args.model, nodes, args.wall,
                                     args.exit_code, args.failure)
    else:
        code = 1
        try:
            code = _train(args, argv, passthrough)
        finally:
            if args.exit_file is not None:
                atomic_write_text(args.exit_file, f"{code}\n")
        return code
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
