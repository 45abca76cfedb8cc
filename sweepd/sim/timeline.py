"""A simulated job's timeline as data: every line with its time and rank, and the ending.

Kept apart from the planner (`sim/plan.py`) so that the process playing a timeline imports
neither the scenario nor pydantic: a planned job is a JSON file (`to_json`/`from_json`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRUN = -1            # a line srun itself writes (all-ranks mode only)
BANNER = None        # a line the batch script writes (unprefixed)


@dataclass(frozen=True)
class Event:
    t: float             # cluster seconds since the job started
    rank: int | None     # None: batch-script line; SRUN: srun's own line
    text: str


@dataclass(frozen=True)
class Plan:
    events: list[Event]
    end_t: float
    exit_code: int                 # the job's exit code (root cause first)
    failure: str | None            # `<stage> failed` for the summary
    rank_exits: dict[int, int]
    hang: bool = False
    files: tuple[tuple[float, Path, str], ...] = ()   # (time, path, text) rank 0 writes


def to_json(plan: Plan) -> dict[str, Any]:
    return {"events": [[e.t, e.rank, e.text] for e in plan.events], "end_t": plan.end_t,
            "exit_code": plan.exit_code, "failure": plan.failure,
            "rank_exits": [[r, c] for r, c in plan.rank_exits.items()], "hang": plan.hang,
            "files": [[t, str(p), text] for t, p, text in plan.files]}


def from_json(data: dict[str, Any]) -> Plan:
    return Plan(events=[Event(t, rank, text) for t, rank, text in data["events"]],
                end_t=data["end_t"], exit_code=data["exit_code"], failure=data["failure"],
                rank_exits={r: c for r, c in data["rank_exits"]}, hang=data["hang"],
                files=tuple((t, Path(p), text) for t, p, text in data["files"]))
