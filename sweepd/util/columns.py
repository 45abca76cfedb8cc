"""Rows of cells as left-aligned text columns, for terminals and monospace chat blocks.

rich lays the columns out (cell widths of wide characters included); the text stays plain,
so it fits a pipe, a file and a Telegram code block alike.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

_TABLE_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def align(rows: Sequence[Sequence[str]], gap: str = "  ") -> list[str]:
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        return [""] * len(rows)
    table = Table(box=None, show_header=False, show_edge=False, pad_edge=False,
                  padding=(0, len(gap), 0, 0), collapse_padding=True)
    for _ in range(width):
        table.add_column(no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*row, *[""] * (width - len(row)))
    out = io.StringIO()
    # No markup, colour or wrapping: cells are data (a `[b]` in a name stays as typed).
    Console(file=out, width=1_000_000, color_system=None, markup=False, highlight=False,
            emoji=False, soft_wrap=False).print(table)
    return [line.rstrip() for line in out.getvalue().split("\n")[:len(rows)]]


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
