"""Which process a pid names: its start time (/proc/<pid>/stat field 22, in clock ticks),
so a job's `[pid, ticks]` pair names one process and never a later one that reused the pid.

Standard library only, and importing nothing of sweepd: the local backend's wrapper
(`local/wrapper.py`) runs as a file under the daemon's interpreter and loads it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def start_ticks(pid: int) -> int | None:
    """A live (non-zombie) process's start time; None when no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def alive(pair: Any) -> bool:
    """`[pid, ticks]` still names a running process."""
    return (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)
            and pair[1] is not None and start_ticks(pair[0]) == pair[1])
