"""`python tests/sim_log.py header|summary ARGS`: what `python -m sweepd.sim header|summary
ARGS` prints (the log header, the JOB SUMMARY block), from the same arguments and the same
functions of `sweepd.sim.logfmt`, without importing the simulated trainer.

The Slurm tests' direct-mode jobs print their header and summary with it: `python -m
sweepd.sim` imports the trainer, its scenario models and the tuning landscapes, 1-2 s of a
loaded 2-core machine's CPU per start, twice in every job. tests/test_sim_log.py holds the
two to the same output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import hostlist

from sweepd.sim import logfmt


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sim_log.py")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("header", "summary"):
        each = sub.add_parser(name)
        each.add_argument("--job-id", required=True)
        each.add_argument("--job-name", required=True)
        each.add_argument("--model", required=True)
        each.add_argument("--nodes", required=True)
        if name == "summary":
            each.add_argument("--exit", type=int, required=True, dest="exit_code")
            each.add_argument("--wall", type=float, required=True)
            each.add_argument("--failure")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = _parser().parse_args(argv[:cut])
    nodes = hostlist.expand_hostlist(args.nodes)
    if args.command == "header":
        lines = logfmt.header_lines(args.job_id, args.job_name, args.model, nodes,
                                    argv[cut + 1:])
    else:
        lines = logfmt.summary_lines(args.job_id, args.job_name, args.model, nodes, args.wall,
                                     args.exit_code, args.failure)
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
