"""A job's log from the stand-in toolkit (tests/fixtures/maxtext) read as the facts it prints:
the environment a rank's `printenv` shows, and the value after a line's fixed lead-in."""

from __future__ import annotations

import re

_ENV_LINE = re.compile(r"(\d+): ([A-Za-z_][A-Za-z0-9_]*)=(.*)")


def printed_env(log: str, rank: int = 0) -> dict[str, str]:
    """Each `NAME=value` line the rank printed (srun -l puts `rank: ` first); a name printed
    twice keeps its last value, as the job's environment did."""
    env: dict[str, str] = {}
    for line in log.splitlines():
        m = _ENV_LINE.fullmatch(line)
        if m and int(m[1]) == rank:
            env[m[2]] = m[3]
    return env


def after(log: str, lead: str) -> list[str]:
    """What follows `lead` on each log line that starts with it, in order."""
    return [line.removeprefix(lead) for line in log.splitlines() if line.startswith(lead)]
