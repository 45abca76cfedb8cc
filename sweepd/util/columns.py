"""Rows of cells as left-aligned text columns, for terminals and monospace chat blocks."""

from __future__ import annotations

import re
from collections.abc import Sequence

_TABLE_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def align(rows: Sequence[Sequence[str]], gap: str = "  ") -> list[str]:
    width = max((len(r) for r in rows), default=0)
    cells = [[*r, *[""] * (width - len(r))] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(width)]
    return [gap.join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in cells]


def aligned_tables(text: str) -> str:
    """Markdown tables as aligned columns, without pipes and rule lines. In a monospace
    block a table is shown as typed: ragged pipes are hard to read, and on a phone every
    character of width counts."""
    out: list[str] = []
    table: list[list[str]] = []
    for line in [*text.split("\n"), ""]:
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1:
            if not _TABLE_RULE.match(stripped):
                table.append([c.strip() for c in stripped[1:-1].split("|")])
            continue
        if table:
            out += align(table)
            table = []
        out.append(line)
    return "\n".join(out[:-1])
