"""A job's log for a person: which job a `sweepd logs` argument names, and each line marked
as the failure's evidence, another matched failure signal, a known false positive, or
plain. The marks come from the store's own facts (the job's failure line and its signals)
and the monitor's signature tables, so the view agrees with what sweepd decided."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweepd.monitor.parse import as_evidence
from sweepd.monitor.signatures import is_false_positive, match_signature
from sweepd.store.rows import Job, Run, SignalRow
from sweepd.store.states import JOB_ACTIVE, JobState

# One read returns at most this many bytes: a follower asks again from the next offset.
CHUNK_BYTES = 1 << 20
# `3` (a run number, else a scheduler job id), `j10018` / `job 10018` (a scheduler job id),
# `id:7` (sweepd's own job number, the JOB column of `show`).
_JOB_ARG = re.compile(r"(j|job|id)?\s*:?\s*([0-9]{1,18})", re.IGNORECASE)
# Not yet given nodes by the scheduler: no log file is expected yet.
_NOT_STARTED = (JobState.SUBMITTING, JobState.QUEUED)
JOB_ARG_HELP = ("a run's number (the # of `show`'s runs table: its latest attempt), or the "
                "scheduler's job id as squeue and `show`'s SLURM ID column print it "
                "(10018 or j10018; a bare number that is a run's number names the run); "
                "default: the sweep's latest job")


class NoSuchJob(LookupError):
    pass


def pick_job(jobs: Sequence[Job], runs: Sequence[Run], which: str | None) -> Job:
    """`None`: the sweep's latest job; `N`: the latest attempt of run #N, else the job the
    scheduler calls N; `jN`: the job the scheduler calls N; `id:N`: sweepd's job N."""
    if not jobs:
        raise NoSuchJob("this sweep has no job yet")
    if which is None or not which.strip():
        return jobs[-1]
    m = _JOB_ARG.fullmatch(which.strip())
    if m is None:
        raise NoSuchJob(f"{which!r} is neither a run number (3) nor a scheduler job id "
                        "(10018 or j10018)")
    prefix, number = (m.group(1) or "").lower(), int(m.group(2))
    if prefix == "id":
        found = [j for j in jobs if j.id == number]
    else:
        found = _run_job(jobs, runs, number) if not prefix else []
        found = found or [j for j in jobs if j.backend_id == str(number)]
    if found:
        return found[-1]
    if not prefix:
        raise NoSuchJob(f"this sweep has no run #{number} with a job, and no job the "
                        f"scheduler calls {number}")
    if prefix == "id":
        raise NoSuchJob(f"sweepd job {number} is not one of this sweep's jobs")
    raise NoSuchJob(f"scheduler job {number} is not one of this sweep's jobs")


def _run_job(jobs: Sequence[Job], runs: Sequence[Run], seq: int) -> list[Job]:
    run_ids = {r.id for r in runs if r.seq == seq}
    return [j for j in jobs if j.run_id in run_ids]


def mark(line: str, evidence: str | None, signal_lines: set[str]) -> str:
    """`evidence`, `signal`, `false_positive` or `` (plain)."""
    text = line.rstrip("\n")
    kept = as_evidence(text)   # what the store kept of a long line
    if evidence and text.strip() and evidence.strip() in (text.strip(), kept.strip()):
        return "evidence"
    if text in signal_lines or kept in signal_lines:
        return "signal"
    if match_signature(text) is not None and is_false_positive(text):
        return "false_positive"
    return ""


def read_log(job: Job, signals: Sequence[SignalRow], offset: int = 0) -> dict[str, Any]:
    """Complete lines from byte `offset` (at most CHUNK_BYTES), each with its mark."""
    out: dict[str, Any] = {"job": job.id, "backend_id": job.backend_id, "run_id": job.run_id,
                           "attempt": job.attempt, "state": job.state, "path": job.log_path,
                           "offset": offset, "next_offset": offset, "lines": [],
                           "ended": job.state not in JOB_ACTIVE, "not_started": False}
    path = job.log_path
    # Queued: the scheduler has not started it, so its log is not there yet (Slurm creates
    # it when the job starts); not an error, and a follower waits for it.
    if path is None or (job.state in _NOT_STARTED and not Path(path).exists()):
        out["not_started"] = True
        out["missing"] = f"the job has not started yet ({job.state}): no log yet"
        return out
    try:
        with Path(path).open("rb") as f:
            f.seek(offset)
            data = f.read(CHUNK_BYTES)
    except OSError as e:
        out["missing"] = f"cannot read {path}: {e.strerror or type(e).__name__}"
        return out
    # A line still being written waits for its newline, unless the job has ended.
    end = len(data) if out["ended"] and len(data) < CHUNK_BYTES else data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", "replace").splitlines()
    signal_lines = {s.line for s in signals}
    out["lines"] = [{"text": t, "mark": mark(t, job.failure_line, signal_lines)} for t in lines]
    out["next_offset"] = offset + end
    out["more"] = len(data) == CHUNK_BYTES
    return out
