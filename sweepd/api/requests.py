"""What a handler reads from a request, checked: the service (and the other app keys), the
sweep id in the path, a JSON body, a bounded query number, the list filters, node lists,
and the socket peer's user name. A bad value is an `ApiError` naming what was wrong."""

from __future__ import annotations

import asyncio
import json
import pwd
import re
import socket
from typing import Any

from aiohttp import web

from sweepd.api.errors import ApiError
from sweepd.api.peers import PeerPolicy, peer_of
from sweepd.app.service import Service
from sweepd.store.states import SweepState
from sweepd.util.hostlists import MAX_NODES, count_hostlist, expand_nodes
from sweepd.util.text import control_chars, describe_controls

SERVICE = web.AppKey("service", Service)
CLOSING = web.AppKey("closing", asyncio.Event)
PEERS = web.AppKey("peers", PeerPolicy)

_ISO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9:.]+Z?)?")
_LIST_PARAMS = frozenset({"state", "kind", "since", "user", "order"})


def service_of(request: web.Request) -> Service:
    return request.app[SERVICE]


def sweep_id_of(request: web.Request) -> int:
    raw = request.match_info["id"]
    # ASCII digits only (str.isdigit takes "²" and other scripts' digits), and within
    # SQLite's integer range.
    if not re.fullmatch(r"[0-9]{1,18}", raw):
        raise ApiError(404, f"sweep {raw!r} not found: ids are positive whole numbers")
    return int(raw)


async def json_body(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.read()  # over client_max_size: HTTPRequestEntityTooLarge -> 413
    if optional and not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, "request body is not valid JSON",
                       [{"loc": [], "msg": str(e)}]) from None


def query_number(request: web.Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # also refuses nan
        raise ApiError(400, f"query parameter {name}={raw!r} must be a number in "
                            f"[{low:g}, {high:g}]", [{"loc": ["query", name], "msg": "bad value"}])
    return value


def node_list(body: dict[str, Any], key: str) -> list[str]:
    given = body.get(key) or []
    if not isinstance(given, list) or not all(isinstance(n, str) for n in given):
        raise ApiError(422, f"{key} must be a list of node names",
                       [{"loc": [key], "msg": "must be a list of strings"}])
    nodes: list[str] = []
    for i, expr in enumerate(given):
        try:
            # Bounded as a whole, not only per expression: many small ones add up.
            if control_chars(expr):
                raise ValueError(f"{describe_controls(expr)} in a node name")
            if i and len(nodes) + count_hostlist(expr) > MAX_NODES:
                raise ValueError(f"{key} names more than {MAX_NODES:,} nodes in all")
            nodes += expand_nodes(expr)
        except ValueError as e:
            raise ApiError(422, f"bad {key} nodes: {e}",
                           [{"loc": [key, i], "msg": str(e)}]) from None
    return list(dict.fromkeys(nodes))


def submitter(request: web.Request) -> str | None:
    """The user name of the socket peer (its uid when the name is unknown); None off a
    Unix socket."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    uid = peer_of(sock).uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def list_filters(request: web.Request) -> dict[str, Any]:
    q = request.query
    unknown = set(q) - _LIST_PARAMS
    if unknown:
        raise ApiError(400, f"unknown query parameter(s): {', '.join(sorted(unknown))}")
    states = [p for v in q.getall("state", []) for p in v.split(",") if p]
    bad = [p for p in states if p not in SweepState.__members__.values()]
    if bad:
        raise ApiError(400, f"not sweep states: {', '.join(bad)}; states are "
                            f"{', '.join(SweepState)}", [{"loc": ["query", "state"],
                                                         "msg": "bad value"}])
    since = q.get("since")
    if since is not None and not _ISO_TIME.fullmatch(since):
        raise ApiError(400, f"since={since!r} is not an ISO time (2026-01-31T12:00:00Z)",
                       [{"loc": ["query", "since"], "msg": "bad value"}])
    return {"states": states, "kinds": [p for v in q.getall("kind", []) for p in v.split(",")
                                        if p],
            "since": since, "user": q.get("user")}
