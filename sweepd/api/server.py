"""HTTP+JSON on the daemon's Unix socket: thin handlers over `Service`.

Errors are mapped to JSON in `errors.error_middleware`; handlers only parse the request
and call the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pwd
import re
import socket
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from sweepd.api.errors import AnotherSweepd, ApiError, error_middleware
from sweepd.api.peers import PeerPolicy, group_id, peer_of, secure_socket
from sweepd.app.service import Service
from sweepd.core.states import SweepState
from sweepd.store.rows import Event
from sweepd.util.hostlists import MAX_NODES, count_hostlist, expand_nodes
from sweepd.util.text import control_chars, describe_controls

MAX_WAIT_S = 30.0
# How long one stream pass waits for new lines before it re-reads the sweep's state.
STREAM_POLL_S = 5.0
# The sweep states after which no progress line comes without a person acting.
STOPPED = frozenset({SweepState.DONE, SweepState.FAILED, SweepState.ABORTED,
                     SweepState.AWAITING_DECISION})

log = structlog.get_logger("sweepd.api")

SERVICE = web.AppKey("service", Service)
CLOSING = web.AppKey("closing", asyncio.Event)


PEERS = web.AppKey("peers", PeerPolicy)


def check_peer(request: web.Request) -> None:
    """Only the daemon's user, root and the configured group may use the API."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family != socket.AF_UNIX:
        return  # not a Unix socket (in-process test clients): no peer to check
    peer = peer_of(sock)
    if not request.app[PEERS].allows(peer):
        log.warning("api.peer_refused", uid=peer.uid, gid=peer.gid, pid=peer.pid)
        raise ApiError(403, f"uid {peer.uid} may not use sweepd: only its own user, root "
                            "and members of the configured socket group may")


@web.middleware
async def peer_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    check_peer(request)
    return await handler(request)


def _service(request: web.Request) -> Service:
    return request.app[SERVICE]


def _sweep_id(request: web.Request) -> int:
    raw = request.match_info["id"]
    # ASCII digits only (str.isdigit takes "²" and other scripts' digits), and within
    # SQLite's integer range.
    if not re.fullmatch(r"[0-9]{1,18}", raw):
        raise ApiError(404, f"sweep {raw!r} not found: ids are positive whole numbers")
    return int(raw)


async def _json_body(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.read()  # over client_max_size: HTTPRequestEntityTooLarge -> 413
    if optional and not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, "request body is not valid JSON",
                       [{"loc": [], "msg": str(e)}]) from None


def _number(request: web.Request, name: str, default: float, low: float, high: float) -> float:
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


def progress_dict(event: Event) -> dict[str, Any]:
    return {"id": event.id, "at": event.at, "reason": event.reason}


# -- handlers ----------------------------------------------------------------------------

async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "recovered": _service(request).recovered})


async def submit(request: web.Request) -> web.Response:
    data = await _json_body(request)
    return web.json_response(await _service(request).submit(data, submitter(request)),
                             status=201)


async def list_sweeps(request: web.Request) -> web.Response:
    if request.query:   # filters (or an order) given: newest first
        return web.json_response(await _service(request).find_sweeps(**_filters(request)))
    return web.json_response(await _service(request).list_sweeps())


async def show(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).show(_sweep_id(request)))


async def report(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).report(_sweep_id(request)))


async def report_md(request: web.Request) -> web.Response:
    out = await _service(request).report(_sweep_id(request))
    return web.Response(text=out["markdown"], content_type="text/markdown")


async def plot(request: web.Request) -> web.Response:
    png = await _service(request).plot(_sweep_id(request))
    if png is None:
        raise ApiError(404, "no plot for this sweep (its kind draws none, or nothing ran yet)")
    return web.Response(body=png, content_type="image/png")


async def explain(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).explain(_sweep_id(request)))


async def cancel(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).cancel(_sweep_id(request)))


async def abort(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).abort(_sweep_id(request)))


def _node_list(body: dict[str, Any], key: str) -> list[str]:
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


async def resume(request: web.Request) -> web.Response:
    """Optional body `{"exclude": [...], "readmit": [...]}`: nodes to add to the sweep's
    exclusions, and excluded nodes to put back in use (hostlist expressions)."""
    sweep_id = _sweep_id(request)
    body = await _json_body(request, optional=True)
    if body is None:
        body = {}
    if not isinstance(body, dict) or set(body) - {"exclude", "readmit"}:
        raise ApiError(400, 'resume takes an optional body {"exclude": ["node", ...], '
                            '"readmit": ["node", ...]}')
    return web.json_response(await _service(request).resume(
        sweep_id, _node_list(body, "exclude"), _node_list(body, "readmit")))


async def progress(request: web.Request) -> web.Response:
    sweep_id = _sweep_id(request)
    after = int(_number(request, "after", 0, 0, 2**62))
    wait_s = _number(request, "wait", 0.0, 0.0, MAX_WAIT_S)
    events = await _service(request).progress(sweep_id, after, wait_s)
    return web.json_response({"events": [progress_dict(e) for e in events],
                              "last": events[-1].id if events else after})


async def stream(request: web.Request) -> web.StreamResponse:
    """NDJSON progress lines until the sweep stops (or the client or the server goes)."""
    service = _service(request)
    sweep_id = _sweep_id(request)
    after = int(_number(request, "after", 0, 0, 2**62))
    await service.store.sweep(sweep_id)  # NotFound -> 404 before the stream starts
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    closing = request.app[CLOSING]
    with contextlib.suppress(ConnectionResetError):
        while not closing.is_set():
            # State first, then lines: a line written with the stopping transition is
            # still sent before the stream ends.
            state = (await service.store.sweep(sweep_id)).state
            events = await service.progress(sweep_id, after, 0 if state in STOPPED
                                            else STREAM_POLL_S)
            for event in events:
                await response.write(json.dumps(progress_dict(event)).encode() + b"\n")
                after = event.id
            if state in STOPPED:
                break
        await response.write_eof()
    return response


# -- the CLI's views: list filters, a job's log, status, validate, models ------------------

_ISO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9:.]+Z?)?")
_LIST_PARAMS = frozenset({"state", "kind", "since", "user", "order"})


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


def _filters(request: web.Request) -> dict[str, Any]:
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


async def job_log(request: web.Request) -> web.Response:
    sweep_id = _sweep_id(request)
    offset = int(_number(request, "offset", 0, 0, 2**62))
    which = request.query.get("job")
    return web.json_response(await _service(request).job_log(sweep_id, which, offset))


async def status(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).status())


async def validate(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).validate(await _json_body(request)))


async def models(request: web.Request) -> web.Response:
    return web.json_response(_service(request).models())


def add_cli_routes(app: web.Application) -> None:
    app.router.add_get("/status", status)
    app.router.add_get("/models", models)
    app.router.add_post("/validate", validate)
    app.router.add_get("/sweeps/{id}/log", job_log)


# -- the application ---------------------------------------------------------------------

def make_app(service: Service, max_body_bytes: int = 1 << 20,
             peers: PeerPolicy | None = None) -> web.Application:
    app = web.Application(client_max_size=max_body_bytes,
                          middlewares=[error_middleware, peer_middleware])
    app[SERVICE] = service
    app[PEERS] = peers or PeerPolicy()
    app[CLOSING] = asyncio.Event()

    async def on_shutdown(app: web.Application) -> None:
        app[CLOSING].set()  # end open streams so a stopping daemon is not held up

    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/health", health)
    add_metrics_route(app)
    app.router.add_post("/sweeps", submit)
    app.router.add_get("/sweeps", list_sweeps)
    app.router.add_get("/sweeps/{id}", show)
    app.router.add_get("/sweeps/{id}/report", report)
    app.router.add_get("/sweeps/{id}/report.md", report_md)
    app.router.add_get("/sweeps/{id}/explain", explain)
    app.router.add_get("/sweeps/{id}/plot.png", plot)
    app.router.add_get("/sweeps/{id}/progress", progress)
    app.router.add_get("/sweeps/{id}/stream", stream)
    app.router.add_post("/sweeps/{id}/cancel", cancel)
    app.router.add_post("/sweeps/{id}/resume", resume)
    app.router.add_post("/sweeps/{id}/abort", abort)
    add_cli_routes(app)
    return app


def _served(path: Path) -> bool:
    """Does a live process listen on the socket file at `path`?"""
    if not path.is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            return False
    return True


def refuse_if_served(path: Path) -> None:
    """Before a daemon creates anything: another one already serving here refuses it."""
    if _served(path):
        raise AnotherSweepd(f"another sweepd is already serving on {path}")


def _remove_stale_socket(path: Path) -> None:
    """A socket file left by a daemon that died blocks bind(); a live one must be kept."""
    refuse_if_served(path)
    if path.is_socket():
        path.unlink()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _remove_own_socket(path: Path, inode: int | None) -> None:
    """A gone socket reads "not running" to clients; a newer daemon's socket is kept."""
    if _inode(path) == inode:
        path.unlink(missing_ok=True)


async def start_server(service: Service, socket_path: Path,
                       max_body_bytes: int = 1 << 20,
                       socket_group: str | None = None) -> web.AppRunner:
    """Serve on a Unix socket; the caller stops it with `runner.cleanup()`."""
    socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    _remove_stale_socket(socket_path)
    group = group_id(socket_group)
    app = make_app(service, max_body_bytes, PeerPolicy(group=group))
    bound: list[int | None] = []  # the socket's inode, known once it is bound

    async def remove_socket(app: web.Application) -> None:
        if bound:
            _remove_own_socket(socket_path, bound[0])

    app.on_cleanup.append(remove_socket)  # before setup(): the app is frozen after it
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        await web.UnixSite(runner, str(socket_path)).start()
        bound.append(_inode(socket_path))
        secure_socket(socket_path, group)
    except BaseException:
        await runner.cleanup()
        raise
    return runner


# -- Prometheus metrics ----------------------------------------------------------------

async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format, read from the store now (see sweepd.core.metrics)."""
    from sweepd.core.metrics import CONTENT_TYPE, exposition

    service = _service(request)
    body = await exposition(service.store, service.engine.backend)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def add_metrics_route(app: web.Application) -> None:
    app.router.add_get("/metrics", metrics)


async def start_metrics_listener(service: Service, listen: str) -> web.AppRunner:
    """`/metrics` alone on a TCP address (`host:port`), for a scraper that cannot reach the
    Unix socket. Nothing else of the API is served there: it has no peer check."""
    host, _, port = listen.rpartition(":")
    app = web.Application(middlewares=[error_middleware])
    app[SERVICE] = service
    add_metrics_route(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host.strip("[]") or None, int(port)).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
