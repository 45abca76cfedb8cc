"""Reading what Slurm's commands print: job states, exit codes and times (squeue, scontrol,
sacct), node states (sinfo), and the sweepd token a job carries (its comment or, in
submit.sh mode, its name). Pure: text in, values out.
"""

from __future__ import annotations

import re
from datetime import datetime

from sweepd.clusters.base import JobStatus, SchedulerState
from sweepd.util.jobname import passthrough_part

COMMENT_PREFIX = "sweepd:"
TOKEN_ENV = "SWEEPD_TOKEN"

_STATES: dict[str, SchedulerState] = {
    "PENDING": SchedulerState.PENDING,
    "CONFIGURING": SchedulerState.PENDING,
    "REQUEUED": SchedulerState.PENDING,
    "REQUEUE_HOLD": SchedulerState.PENDING,
    "REQUEUE_FED": SchedulerState.PENDING,
    "RESV_DEL_HOLD": SchedulerState.PENDING,
    # Suspended jobs make no progress through no fault of their own: not a hang.
    "SUSPENDED": SchedulerState.PENDING,
    "STOPPED": SchedulerState.PENDING,
    "RUNNING": SchedulerState.RUNNING,
    "RESIZING": SchedulerState.RUNNING,
    "SIGNALING": SchedulerState.COMPLETING,
    "STAGE_OUT": SchedulerState.COMPLETING,
    "COMPLETING": SchedulerState.COMPLETING,
    "COMPLETED": SchedulerState.COMPLETED,
    "FAILED": SchedulerState.FAILED,
    "SPECIAL_EXIT": SchedulerState.FAILED,
    "CANCELLED": SchedulerState.CANCELLED,
    "REVOKED": SchedulerState.CANCELLED,
    "TIMEOUT": SchedulerState.TIMEOUT,
    "DEADLINE": SchedulerState.TIMEOUT,
    "NODE_FAIL": SchedulerState.NODE_FAIL,
    "BOOT_FAIL": SchedulerState.NODE_FAIL,
    "OUT_OF_MEMORY": SchedulerState.OUT_OF_MEMORY,
    "PREEMPTED": SchedulerState.PREEMPTED,
}

# sinfo's long state names -> the short ones sweepd uses everywhere (`sinfo %t` style).
_NODE_STATES = {"allocated": "alloc", "mixed": "mix", "drained": "drain", "draining": "drng",
                "completing": "comp", "reserved": "resv", "maintenance": "maint"}
# Flag characters sinfo appends to a state (`down*`, `idle~`, `drain$`...).
_NODE_FLAGS = "*~#!%$@^-+"


def map_state(raw: str) -> SchedulerState:
    """`CANCELLED by 0` -> CANCELLED; a state this code does not know is kept watched."""
    word = raw.split()[0].upper() if raw.strip() else ""
    return _STATES.get(word, SchedulerState.PENDING)


def wait_status_exit(raw: str) -> int | None:
    """squeue's `exit_code` is a wait(2) status: 768 -> 3, a signal -> 128 + signal."""
    if not raw.strip().isdigit():
        return None
    status = int(raw)
    return 128 + (status & 0x7F) if status & 0x7F else status >> 8


def scontrol_exit(raw: str) -> int | None:
    """scontrol's `ExitCode=3:0` (code:signal) -> 3; `0:15` -> 143."""
    code, _, sig = raw.partition(":")
    if not code.isdigit():
        return None
    return 128 + int(sig) if sig.isdigit() and int(sig) else int(code)


def slurm_time(raw: str) -> float | None:
    """Slurm's `2026-12-02T00:54:33` (the client's local time) -> epoch seconds; `N/A`,
    `Unknown`, `None` -> None."""
    try:
        return datetime.fromisoformat(raw.strip()).timestamp()
    except ValueError:
        return None


def _times(state: SchedulerState, start: str, end: str) -> tuple[float | None, float | None]:
    """A pending job's StartTime is a forecast, a running one's EndTime its time limit:
    only what has happened is kept."""
    return (slurm_time(start) if state != SchedulerState.PENDING else None,
            slurm_time(end) if state.finished else None)


def parse_squeue_poll(out: str) -> dict[str, JobStatus]:
    """Lines of `JobID|State|exit_code|Reason[|StartTime|EndTime]`."""
    found: dict[str, JobStatus] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|", 3)]
        if len(parts) < 4 or not parts[0]:
            continue
        state = map_state(parts[1])
        exit_code = wait_status_exit(parts[2]) if state.finished else None
        # The times come last: a reason is free text, the two times never hold a `|`.
        reason_times = parts[3].rsplit("|", 2)
        raw_reason = reason_times[0].strip()
        start, end = (_times(state, reason_times[1], reason_times[2])
                      if len(reason_times) == 3 else (None, None))
        reason = raw_reason if raw_reason not in ("", "None", "(null)") else None
        found[parts[0]] = JobStatus(state, exit_code, reason, start=start, end=end)
    return found


def parse_scontrol_job(out: str) -> JobStatus | None:
    fields = dict(re.findall(r"\b(JobState|ExitCode|Reason|StartTime|EndTime)=(\S+)", out))
    if "JobState" not in fields:
        return None
    state = map_state(fields["JobState"])
    exit_code = scontrol_exit(fields.get("ExitCode", "")) if state.finished else None
    reason = fields.get("Reason")
    start, end = _times(state, fields.get("StartTime", ""), fields.get("EndTime", ""))
    return JobStatus(state, exit_code, None if reason in (None, "None") else reason,
                     start=start, end=end)


def parse_sacct_times(out: str) -> tuple[float | None, float | None]:
    """`Start|End` from `sacct -X -n -P`: the first line (the allocation)."""
    for line in out.splitlines():
        start, sep, end = line.strip().partition("|")
        if sep:
            return slurm_time(start), slurm_time(end)
    return None, None


def parse_node_states(out: str) -> dict[str, str]:
    states: dict[str, str] = {}
    for line in out.splitlines():
        node, sep, state = line.strip().partition("|")
        if sep:
            short = state.strip().lower().rstrip(_NODE_FLAGS)
            states[node] = _NODE_STATES.get(short, short)
    return states


def token_matches(token: str, name: str, comment: str) -> bool:
    if comment.strip() == COMMENT_PREFIX + token:
        return True
    # submit.sh mode: `_env_SWEEPD_TOKEN=<t>` became the name part `_env_SWEEPD_TOKEN_<t>`.
    part = passthrough_part(f"_env_{TOKEN_ENV}={token}")
    return re.search(rf"(^|-){re.escape(part)}(-|$)", name) is not None


# A sweepd token in a submit.sh job name: `..._env_SWEEPD_TOKEN_sw3-1a2b3c4d.e5f6a7-...`.
_TOKEN_IN_NAME = re.compile(
    rf"(?:^|-){re.escape(passthrough_part(f'_env_{TOKEN_ENV}='))}"
    r"(sw\d+-[0-9a-f]{8}(?:\.[0-9a-f]+)?)(?=-|$)")


def token_of(name: str, comment: str) -> str | None:
    """The sweepd token a job carries (its comment, else its submit.sh name), if any."""
    comment = comment.strip()
    if comment.startswith(COMMENT_PREFIX):
        return comment[len(COMMENT_PREFIX):] or None
    found = _TOKEN_IN_NAME.search(name)
    return found.group(1) if found else None

