"""`sweepd parse LOG`: what sweepd reads from one log, without a daemon ("what would
sweepd make of this?"). The reading is the engine's own (`monitor/reading`: its parser,
its fold of the facts, its classifier); this module only opens the file and prints.

Exit codes: 0 the log was read (whatever it says), 2 it could not be (missing, not a
file, unreadable), or bad arguments.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import shtab

from sweepd.cli.output import fail, print_json, say
from sweepd.monitor.reading import DEFAULT_STEPS, LogReading, read_log
from sweepd.monitor.steady import window_words

CHUNK = 1 << 20
# Longer lines are cut: every line sweepd reads is far shorter (a step line is ~250 bytes).
MAX_LINE = 1 << 16

HELP = "what sweepd reads from one log: steps, steady TGS, memory, failure class"
DESCRIPTION = (
    "Read one log as sweepd reads a job's (its parser and failure classifier; no daemon "
    "needed): the steps seen, the steady TGS, the compiled-memory and Memstats lines, and "
    "the failure class with the line that proved it. The TGS printed (JSON `tgs`) is the "
    "MEDIAN tokens/s/device over the steps it names (JSON `window`): the " + window_words()
    + "; a log with none of the window's steps is measured over its steps from 3 on. "
    "The engine records the window's MEAN (JSON `tgs_mean`).")


def add_parse_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("parse", help=HELP, description=DESCRIPTION,
                       epilog="exit codes: 0 read, 2 the log could not be read")
    log = p.add_argument("log", type=Path, metavar="LOG", help="a job's log file")
    log.complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable output")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help="the run's steps (default: the log's `Config param steps:`, else "
                        f"{DEFAULT_STEPS}): a run that reached step N-1 has finished")
    p.add_argument("--profiler", action="store_true",
                   help="the run had the profiler on (steady window steps 9-14)")
    p.add_argument("--exit", type=int, default=None, metavar="CODE", dest="exit_code",
                   help="the job's exit code, where known (a log without a JOB SUMMARY "
                        "does not say it)")
    p.set_defaults(func=run_parse)


def run_parse(args: argparse.Namespace) -> int:
    if args.steps is not None and args.steps < 1:
        return fail(args, "--steps must be at least 1")
    try:
        with open(args.log, "rb") as f:
            reading = read_log(lines(f), expected_steps=args.steps, profiler=args.profiler,
                               exit_code=args.exit_code)
    except IsADirectoryError:
        return fail(args, f"{args.log}: cannot read the log: it is a directory")
    except OSError as e:
        return fail(args, f"{args.log}: cannot read the log: {e.strerror or e}")
    if getattr(args, "json", False):
        print_json({"log": str(args.log), **as_json(reading)})
    else:
        for line in as_text(reading):
            say(line)
    return 0


def lines(f: BinaryIO) -> Iterator[str]:
    """The file's lines without their newlines (the last one too, cut or not), each at
    most MAX_LINE bytes, read a chunk at a time: any file, in bounded memory."""
    line = b""
    while chunk := f.read(CHUNK):
        *whole, rest = chunk.split(b"\n")
        for part in whole:
            yield _text(line + part[:MAX_LINE - len(line)])
            line = b""
        line += rest[:MAX_LINE - len(line)]
    if line:
        yield _text(line)


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\r").decode("utf-8", errors="replace")


def _finite(value: float | None) -> float | None:
    """JSON has no inf or nan: a garbled log's such number is null."""
    return value if value is not None and math.isfinite(value) else None


def as_json(r: LogReading) -> dict[str, Any]:
    f, c, m = r.failure, r.compiled, r.memstats
    return {
        "tgs": _finite(r.tgs_median),
        "tgs_mean": _finite(r.tgs_mean),
        "window": list(r.window),
        "window_fallback": r.fallback,
        "steps": r.last_step,
        "expected_steps": r.expected_steps,
        "profiler": r.profiler,
        "phase": str(r.phase),
        "memory_gb": _finite(c.total_gb) if c else None,
        "compiled": {k: _finite(v) for k, v in (
            ("total_gb", c.total_gb), ("output_gb", c.output_gb), ("temp_gb", c.temp_gb),
            ("argument_gb", c.argument_gb), ("host_temp_gb", c.host_temp_gb))} if c else None,
        "memstats_used_gb": _finite(m.used_gb) if m else None,
        "memstats_total_gb": _finite(m.limit_gb) if m else None,
        "failure": str(f.verdict.klass) if f.verdict.klass is not None else None,
        "failure_line": f.verdict.evidence,
        "failure_line_number": f.line_number,
        "failure_detail": f.verdict.detail,
        "failure_node": f.verdict.node,
        "oom_required_gb": _finite(f.required_gb),
        "oom_available_gb": _finite(f.available_gb),
    }


def _gb(value: float) -> str:
    """As MaxText prints its GB: two decimals, or one where the second is 0."""
    text = f"{value:.2f}"
    return text[:-1] if text.endswith("0") and math.isfinite(value) else text


def _span(steps: tuple[int, ...] | list[int]) -> str:
    return (f"{steps[0]}-{steps[-1]}" if list(steps) == list(range(steps[0], steps[-1] + 1))
            else ", ".join(map(str, steps)))


def as_text(r: LogReading) -> list[str]:
    """One line per group of facts."""
    out = []
    if r.last_step is None:
        out.append("steps: none completed")
    else:
        out.append(f"steps: last completed step {r.last_step} (of {r.expected_steps}: "
                   f"steps 0-{r.expected_steps - 1})")
    if r.tgs_median is None or r.tgs_mean is None:
        out.append("steady TGS: none (no step from 3 on; " + window_words(r.profiler) + ")")
    else:
        which = ("a shorter run's fallback, from step 3 on: the engine records no TGS "
                 "without a step in the window" if r.fallback else "the steady window")
        out.append(f"steady TGS: {r.tgs_median:,.1f} tokens/s/device median (mean "
                   f"{r.tgs_mean:,.1f}) over steps {_span(r.window)}, {which}")
    c = r.compiled
    out.append("compiled memory: none printed" if c is None else
               f"compiled memory: {_gb(c.total_gb)} GB total (output {_gb(c.output_gb)}, "
               f"temp {_gb(c.temp_gb)}, argument {_gb(c.argument_gb)}, host temp "
               f"{_gb(c.host_temp_gb)})")
    m = r.memstats
    out.append("memstats: none printed" if m is None else
               f"memstats: {_gb(m.used_gb)} of {_gb(m.limit_gb)} GB in use")
    out.append(_failure_text(r))
    return out


def _failure_text(r: LogReading) -> str:
    f, v = r.failure, r.failure.verdict
    if v.klass is None:
        return "failure: none (passed)"
    head = f"failure: {v.klass}"
    if f.required_gb is not None and f.available_gb is not None:
        head += f" ({_gb(f.required_gb)} GiB needed, {_gb(f.available_gb)} GiB available)"
    elif v.detail:
        head += f" ({v.detail})"
    if v.node:
        head += f" on {v.node}"
    where = f"line {f.line_number}: " if f.line_number is not None else ""
    return f"{head}; proved by {where}{v.evidence}" if v.evidence else head
