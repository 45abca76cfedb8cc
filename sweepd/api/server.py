"""The daemon's HTTP+JSON API on its Unix socket: the application (its middlewares: errors
as JSON, the peer check), serving it on the socket file (a stale one replaced, a live
one refused, our own removed at the end), and `/metrics` alone on a TCP listener.

The handlers are in api/handlers.py, what they read from a request in api/requests.py.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from sweepd.api.errors import AnotherSweepd, ApiError, error_middleware
from sweepd.api.handlers import add_metrics_route, add_routes
from sweepd.api.peers import PeerPolicy, group_id, peer_of, secure_socket
from sweepd.api.requests import CLOSING, PEERS, SERVICE
from sweepd.app.daemon import Front
from sweepd.app.service import Service
from sweepd.util.tcp_site import serve_tcp
from sweepd.web.server import start_web

log = structlog.get_logger("sweepd.api")


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
    add_routes(app)
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


async def start_metrics_listener(service: Service, listen: str) -> web.AppRunner:
    """`/metrics` alone on a TCP address (`host:port`), for a scraper that cannot reach the
    Unix socket. Nothing else of the API is served there: it has no peer check."""
    app = web.Application(middlewares=[error_middleware])
    app[SERVICE] = service
    add_metrics_route(app)
    return await serve_tcp(app, listen, shutdown_timeout=5.0)


# What `app/daemon.serve` serves its service through (the caller hands it in).
FRONT = Front(refuse_if_served=refuse_if_served, start=start_server,
              start_metrics=start_metrics_listener, start_web=start_web)
