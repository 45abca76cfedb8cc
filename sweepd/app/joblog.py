"""A job's log for a person: which job a `sweepd logs` argument names, and each line marked
as the failure's evidence, another matched failure signal, a known false positive, or
plain. The marks come from the store's own facts (the job's failure line and its signals)
and the monitor's signature tables, so the view agrees with what sweepd decided."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.core.states import JOB_ACTIVE
from sweepd.monitor.signatures import is_false_positive, match_signature
from sweepd.store.rows import Job, Run, SignalRow

# One read returns at most this many bytes: a follower asks again from the next offset.
CHUNK_BYTES = 1 << 20
_JOB_ARG = re.compile(r"(?:j|job)?:?([0-9]{1,18})", re.IGNORECASE)


class NoSuchJob(LookupError):
    pass


def pick_job(jobs: Sequence[Job], runs: Sequence[Run], which: str | None) -> Job:
    """`None`: the sweep's latest job; `N`: the latest attempt of run #N; `jN`: job N."""
    if not jobs:
        raise NoSuchJob("this sweep has no job yet")
    if which is None or not which.strip():
        return jobs[-1]
    m = _JOB_ARG.fullmatch(which.strip())
    if m is None:
        raise NoSuchJob(f"{which!r} is neither a run number (3) nor a job id (j12)")
    number = int(m.group(1))
    if which.strip()[0].isdigit():
        run_ids = {r.id for r in runs if r.seq == number}
        found = [j for j in jobs if j.run_id in run_ids]
        if not found:
            raise NoSuchJob(f"this sweep has no run #{number} with a job")
        return found[-1]
    for job in jobs:
        if job.id == number:
            return job
    raise NoSuchJob(f"job {number} is not one of this sweep's jobs")


def mark(line: str, evidence: str | None, signal_lines: set[str]) -> str:
    """`evidence`, `signal`, `false_positive` or `` (plain)."""
    text = line.rstrip("\n")
    if evidence and text.strip() and text.strip() == evidence.strip():
        return "evidence"
    if text in signal_lines:
        return "signal"
    if match_signature(text) is not None and is_false_positive(text):
        return "false_positive"
    return ""


def read_log(job: Job, signals: Sequence[SignalRow], offset: int = 0) -> dict[str, Any]:
    """Complete lines from byte `offset` (at most CHUNK_BYTES), each with its mark."""
    out: dict[str, Any] = {"job": job.id, "run_id": job.run_id, "attempt": job.attempt,
                           "state": job.state, "path": job.log_path, "offset": offset,
                           "next_offset": offset, "lines": [],
                           "ended": job.state not in JOB_ACTIVE}
    if job.log_path is None:
        out["missing"] = "the job has no log yet (not submitted)"
        return out
    try:
        with Path(job.log_path).open("rb") as f:
            f.seek(offset)
            data = f.read(CHUNK_BYTES)
    except OSError as e:
        out["missing"] = f"cannot read {job.log_path}: {e.strerror or type(e).__name__}"
        return out
    # A line still being written waits for its newline, unless the job has ended.
    end = len(data) if out["ended"] and len(data) < CHUNK_BYTES else data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", "replace").splitlines()
    signal_lines = {s.line for s in signals}
    out["lines"] = [{"text": t, "mark": mark(t, job.failure_line, signal_lines)} for t in lines]
    out["next_offset"] = offset + end
    out["more"] = len(data) == CHUNK_BYTES
    return out
