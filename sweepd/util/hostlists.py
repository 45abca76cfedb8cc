"""Hostlist expressions (`chi[2832,2867-2868]`): counted from their ranges before they are
expanded (python-hostlist), so a typo's `chi[1-100000]` is refused, not expanded."""

from __future__ import annotations

import re

import hostlist

from sweepd.util.text import escape

# The most nodes a hostlist may name: a sweep's pinned nodes, or one resume's exclusions.
# Far above any sweep's needs, far below a typo's `chi[1-100000]`, whose names would fill
# every error message and a person's terminal.
MAX_NODES = 4096
_GROUP = re.compile(r"\[([^\]]*)\]")
_PART = re.compile(r"(?:[^,\[]|\[[^\]]*\])+")   # a top-level comma-separated part
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")


def _range_size(text: str) -> int:
    m = _RANGE.fullmatch(text)
    if m is None:
        return 1   # a single number, or a bad range python-hostlist then names
    low, high = m.groups()
    if len(high) > 9:
        return 10**9
    return max(int(high) - int(low) + 1, 1)


def count_hostlist(expr: str) -> int:
    """How many names `expr` expands to (before duplicates are dropped), computed from
    its ranges without expanding them."""
    total = 0
    for part in _PART.findall(expr):
        size = 1
        for group in _GROUP.findall(part):
            size *= sum(_range_size(r) for r in group.split(","))
        total += size
    return total


def _shown_expr(expr: str) -> str:
    return repr(escape(expr if len(expr) <= 60 else f"{expr[:60]}…"))


def expand_nodes(expr: str, limit: int = MAX_NODES) -> list[str]:
    count = count_hostlist(expr)
    if count > limit:
        raise ValueError(f"the hostlist {_shown_expr(expr)} names {count:,} nodes; at most "
                         f"{limit:,} are allowed")
    try:
        nodes: list[str] = hostlist.expand_hostlist(expr)
    except hostlist.BadHostlist as e:
        raise ValueError(f"bad hostlist expression {_shown_expr(expr)}: {e}") from e
    if not nodes:
        raise ValueError("the node list is empty")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"node list {_shown_expr(expr)} names a node twice")
    return nodes


def collect_nodes(nodes: list[str]) -> str:
    return str(hostlist.collect_hostlist(nodes))
