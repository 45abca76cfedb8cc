"""Text from outside sweepd made safe to show: control characters escaped, node sets
named compactly and bounded.

Anyone who may submit a spec, any job's log line and any name the scheduler reports
reaches people's terminals, Markdown reports and the chat. An escape sequence (ESC, C1
controls), a carriage return or a bidi override in such text could rewrite what a person
sees, and a newline would break a report's table. `escape` is the one function every
output path uses; `control_chars` is what specs refuse.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

import hostlist

# Not Cc, yet they reorder or break what is shown: bidi overrides and isolates, and the
# Unicode line and paragraph separators.
_INVISIBLE = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                       "\u2028\u2029")
# Error messages name node sets in at most this many characters.
SHOWN_CHARS = 200


def is_control(char: str) -> bool:
    return unicodedata.category(char) == "Cc" or char in _INVISIBLE


def control_chars(text: str) -> list[str]:
    """The control characters in `text`, each once, in order of appearance."""
    return list(dict.fromkeys(c for c in text if is_control(c)))


def _shown(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")   # "\x1b", "\n", "\u202e"


def escape(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character written out as its escape (`\\x1b`, `\\r`).
    With `keep_newlines`, "\\n" stays a line break: for whole messages and reports, whose
    own lines are theirs; values put into a line are escaped without it."""
    if not any(is_control(c) for c in text):
        return text
    return "".join(c if (keep_newlines and c == "\n") or not is_control(c) else _shown(c)
                   for c in text)


def describe_controls(text: str) -> str:
    """`control character(s) \\x1b, \\n`: for refusals."""
    found = control_chars(text)
    return (f"control character{'s' if len(found) > 1 else ''} "
            f"{', '.join(_shown(c) for c in found)}")


def compact_nodes(nodes: Iterable[str], limit: int = SHOWN_CHARS) -> str:
    """A node set as a hostlist expression (`chi[1-3,7]`), escaped, and cut short with
    the count when longer than `limit` characters."""
    names = list(nodes)
    try:
        text = str(hostlist.collect_hostlist(names))
    except hostlist.BadHostlist:   # a name with a bracket or a comma: listed as it is
        text = ",".join(names)
    text = escape(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(names)} nodes)"

