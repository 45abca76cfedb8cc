"""Message formats for Telegram: classes, rate limit, digests, Markdown, chunks. Pure code.

Progress lines and stop messages go as plain text (their `per_device_batch_size`-style
underscores would be entities in Markdown); reports go as legacy Markdown with the tables
in a code fence, escaped outside it. A chunk Telegram cannot parse is resent as `plain()`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from sweepd.store.outbox import Part
from sweepd.util.columns import aligned_tables
from sweepd.util.text import escape

LIMIT = 4096
FENCE = "```"
MARKDOWN = "Markdown"
# Room kept in every chunk for "[nnn/mmm] " and a re-opened plus a closed fence.
_PREFIX_ROOM = len("[999/999] ")
_FENCE_ROOM = len(FENCE + "\n") + len("\n" + FENCE)

_STOP = re.compile(r"^\[[\w.-]+ STOP\]")
# The engine's result lines (`reports/lines.py`): `… — FAIL`, and a failed attempt that runs
# again, `… — RETRY: why`.
_FAILURE = re.compile(r" — (?:FAIL\s*$|RETRY: )")
_MD_SPECIAL = re.compile(r"([_*`\[])")
_MD_ESCAPED = re.compile(r"\\([_*`\[])")


class Klass(StrEnum):
    STOP = "stop"          # always at once, with Resume/Abort buttons
    POSITIVE = "positive"  # a passing result, or the answer to a person's action: at once
    FAILURE = "failure"    # a job's failure (or a failed attempt run again): at once
    FINAL = "final"        # the verdict with the report: always at once
    ROUTINE = "routine"    # routine progress: rate-limited, the rest digested


def classify(text: str, final: bool) -> Klass:
    if final:
        return Klass.FINAL
    if _STOP.match(text):
        return Klass.STOP
    if text.rstrip().endswith("— PASS"):
        return Klass.POSITIVE
    if _FAILURE.search(text):
        # The seeds: "When a job fails, report it immediately". Only routine progress waits.
        return Klass.FAILURE
    return Klass.ROUTINE


def routine_allowed(sent_last_hour: int, per_hour: int | None) -> bool:
    """May one more routine message go now? `None` means no limit."""
    return per_hour is None or sent_last_hour < per_hour


def digest_text(lines: Sequence[str]) -> str:
    head = f"Digest: {len(lines)} routine update{'s' if len(lines) != 1 else ''} " \
           "held back by the hourly limit"
    return "\n".join([head, *(f"• {line}" for line in lines)])


def escape_markdown(text: str) -> str:
    """Legacy-Markdown escape for text outside code fences."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def plain(text: str) -> str:
    """The plain-text fallback of a Markdown chunk: escapes removed, fences kept as text."""
    return _MD_ESCAPED.sub(r"\1", text)


def report_markdown(summary: str, report: str) -> str:
    """The final message: the verdict line, then the report in monospace, its tables
    aligned."""
    return f"{escape_markdown(summary)}\n\n{FENCE}\n{aligned_tables(report).rstrip()}\n{FENCE}"


def fenced(text: str) -> str:
    return f"{FENCE}\n{text.rstrip()}\n{FENCE}"


def _pieces(line: str, width: int) -> list[str]:
    """Hard-split a line too long for a chunk, never between a backslash and its char."""
    out = []
    while len(line) > width:
        cut = width - 1 if line[width - 1] == "\\" else width
        out.append(line[:cut])
        line = line[cut:]
    return [*out, line]


def split(text: str, limit: int = LIMIT) -> list[str]:
    """Split into `[n/m] ` chunks of at most `limit` characters, on line boundaries where
    possible; a code fence open at a cut is closed there and re-opened in the next chunk.
    Every message passes here: control characters (from a name, a log line, a node name)
    are escaped first, so none reaches a chat client raw."""
    text = escape(text, keep_newlines=True)
    if len(text) <= limit:
        return [text]
    budget = limit - _PREFIX_ROOM - _FENCE_ROOM
    bodies: list[str] = []
    lines: list[str] = []
    size = 0
    in_fence = starts_in_fence = False

    def emit() -> None:
        body = "\n".join(lines)
        if starts_in_fence:
            body = f"{FENCE}\n{body}"
        if in_fence:
            body = f"{body}\n{FENCE}"
        bodies.append(body)

    for raw in text.split("\n"):
        for line in _pieces(raw, budget):
            add = len(line) + (1 if lines else 0)
            if lines and size + add > budget:
                emit()
                starts_in_fence, lines, size, add = in_fence, [], 0, len(line)
            lines.append(line)
            size += add
            if line.lstrip().startswith(FENCE):
                in_fence = not in_fence
    emit()
    return [f"[{n}/{len(bodies)}] {body}" for n, body in enumerate(bodies, 1)]


def parts(text: str, klass: Klass, report: str | None = None, photo: bool = False,
          limit: int = LIMIT) -> list[Part]:
    """What to send for one message, in order. A stop's last chunk carries the buttons;
    a final report is Markdown (monospace tables) followed by its plot as a photo."""
    if klass == Klass.FINAL and report is not None:
        out = [Part("text", c, MARKDOWN) for c in split(report_markdown(text, report), limit)]
        if photo:
            out.append(Part("photo", ""))  # no caption: the plot's title says what it is,
            # and the verdict line is just above
        return out
    chunks = split(text, limit)
    return [Part("text", c, None, klass == Klass.STOP and n == len(chunks))
            for n, c in enumerate(chunks, 1)]
