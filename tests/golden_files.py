"""A golden file's check: the text said must equal the file's; with `SWEEPD_REWRITE_GOLDEN=1`
the file is rewritten first (review the diff)."""

from __future__ import annotations

import os
import re
from pathlib import Path

REWRITE_VAR = "SWEEPD_REWRITE_GOLDEN"


def check_golden(path: Path, said: str) -> None:
    """Asserts `path` holds exactly `said`, rewriting it first when REWRITE_VAR is 1."""
    if os.environ.get(REWRITE_VAR) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(said)
    assert path.read_text() == said, f"{path} differs ({REWRITE_VAR}=1 rewrites it)"


GOLDEN = Path(__file__).resolve().parent / "golden"
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?)?\b")


def scrubbed(text: str, **names: object) -> str:
    """`text` with what differs between runs put as `<name>`: each given value (a temporary
    directory, a sweep id) and every date or timestamp, so that one golden holds for each run."""
    for name, value in sorted(names.items(), key=lambda kv: -len(str(kv[1]))):
        text = text.replace(str(value), f"<{name}>")
    return _DATE.sub("<date>", text)


def check_golden_cases(path: Path, cases: dict[str, str]) -> None:
    """One golden file for a family of messages a person reads (refusals, stop lines): each
    case's name as a heading over its whole text, so one check holds the family's wording."""
    said = "".join(f"== {name} ==\n{text.rstrip()}\n\n" for name, text in cases.items())
    check_golden(path, said)
