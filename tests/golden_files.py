"""A golden file's check: the text said must equal the file's; with `SWEEPD_REWRITE_GOLDEN=1`
the file is rewritten first (review the diff)."""

from __future__ import annotations

import os
from pathlib import Path

REWRITE_VAR = "SWEEPD_REWRITE_GOLDEN"


def check_golden(path: Path, said: str) -> None:
    """Asserts `path` holds exactly `said`, rewriting it first when REWRITE_VAR is 1."""
    if os.environ.get(REWRITE_VAR) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(said)
    assert path.read_text() == said, f"{path} differs ({REWRITE_VAR}=1 rewrites it)"
