"""A simulated job's log laid out for a golden file (tests/golden/sim_*/): what the toolkit
prints around the steps, as it prints it."""

from __future__ import annotations

import re

_STEP = re.compile(r"completed step: \d+, ")
_PHASE_TIME = re.compile(r"(?<=[( ])\d+s\) ==$", re.MULTILINE)
_WALL = re.compile(r"Wall:   0h \d+m \d+s")


def log_shape(lines: list[str]) -> str:
    """The log's lines with the step lines left out but the last (one shows their format;
    their numbers are the truth's, which the tests assert as numbers), and the phase and
    wall times as <s> (they follow the clock the simulator is given)."""
    step_lines = [i for i, line in enumerate(lines) if _STEP.search(line)]
    last = step_lines[-1] if step_lines else None
    kept = [line for i, line in enumerate(lines) if i == last or i not in step_lines]
    text = _PHASE_TIME.sub("<s>) ==", "\n".join(kept) + "\n")
    return _WALL.sub("Wall:   <s>", text)
