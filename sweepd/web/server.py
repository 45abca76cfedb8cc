"""The read-only dashboard the daemon serves when `[web] listen` is set: `/` the sweeps
(state, progress, ETA, best so far), `/sweeps/ID` the sweep's page (the same as `report
--html`), each kept current by Server-Sent Events (`/events`, `/sweeps/ID/events`).

Built on aiohttp, as the socket API is: the daemon's loop already runs its server, so the
dashboard is one more `AppRunner` on it, with no thread, no second event loop and no new
dependency. Every route is a GET that reads the store (`Queries.page`, `list_sweeps`);
every change stays on the socket and Telegram.

Safe by default: a peer off this host is refused (403) unless `[web] allow` names its
network; every request carries the token from the state directory (`?token=` once, then
the cookie the answer sets, or `Authorization: Bearer`), else 401. The token is never put
in a page, and nothing here logs a URL or a header (no access log).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from sweepd.app.service import Service
from sweepd.config import Config, WebConfig
from sweepd.store.states import SweepState
from sweepd.store.store import NotFound
from sweepd.util.tcp_site import serve_tcp
from sweepd.web.live import Feeds
from sweepd.web.page import document, e, page_title, render_index, render_main
from sweepd.web.token import ensure_token

log = structlog.get_logger("sweepd.web")

COOKIE = "sweepd_token"
ENDED = (SweepState.DONE, SweepState.FAILED, SweepState.ABORTED)
PING_S = 15.0   # a comment line this often: a browser gone is found by the failed write

# The one script a served page runs: follow the page's event stream and put each new
# rendering in place (no reload). Allowed by its hash alone.
SCRIPT = (
    "(function(){var m=document.getElementById('page'),s=document.getElementById('live'),"
    "es=new EventSource(location.pathname.replace(/\\/$/,'')+'/events');"
    "es.addEventListener('page',function(ev){m.innerHTML=JSON.parse(ev.data).html;"
    "s.textContent='live \\u00b7 updated '+new Date().toLocaleTimeString();});"
    "es.onerror=function(){s.textContent='reconnecting\\u2026';};})();")
_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
LIVE_CSP = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{_HASH}'; connect-src 'self'; frame-ancestors 'none'; "
            "base-uri 'none'; form-action 'none'")

TOKEN = web.AppKey("token", str)
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
NETWORKS: web.AppKey[Networks] = web.AppKey("networks")
FEEDS = web.AppKey("feeds", Feeds)
WEB_SERVICE = web.AppKey("web_service", Service)


def peer_allowed(remote: str | None, networks: Networks) -> bool:
    """Loopback always; another address only inside a configured network."""
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or any(address in net for net in networks)


def _presented(request: web.Request) -> tuple[str | None, bool]:
    """The token the request carries, and whether it came in the query."""
    query = request.query.get("token")
    if query is not None:
        return query, True
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip(), False
    return request.cookies.get(COOKIE), False


_REFUSED = ("<h1>sweepd dashboard</h1><p>This page needs the dashboard's token: run "
            "<code>sweepd dashboard</code> on the daemon's host for its URL.</p>")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not peer_allowed(request.remote, request.app[NETWORKS]):
        log.warning("web.peer_refused", peer=request.remote)
        return _html(document("sweepd", "<h1>sweepd dashboard</h1><p>Not served to this "
                                        "address.</p>"), status=403)
    given, in_query = _presented(request)
    token = request.app[TOKEN]
    if given is None or not hmac.compare_digest(given.encode(), token.encode()):
        log.info("web.token_refused", path=request.path, given=given is not None)
        return _html(document("sweepd", _REFUSED), status=401)
    if in_query:
        # Kept in a cookie and taken out of the address bar (and of the history, and of
        # any address copied from it).
        rest = {k: v for k, v in request.query.items() if k != "token"}
        raise _with_cookie(web.HTTPSeeOther(request.rel_url.with_query(rest)), token)
    response = await handler(request)
    response.headers.setdefault("Content-Security-Policy", LIVE_CSP)
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _with_cookie(response: web.HTTPSeeOther, token: str) -> web.HTTPSeeOther:
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/",
                        max_age=30 * 86400)
    return response


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store"})


def _live(title: str, main: str, back: bool) -> str:
    nav = "<a href=\"/\">← all sweeps</a> · " if back else ""
    body = (f"<div class=\"live\">{nav}<span id=\"live\">live</span></div>"
            f"<main id=\"page\">{main}</main><script>{SCRIPT}</script>")
    return document(title, body, csp=LIVE_CSP)


def _sweep_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise web.HTTPNotFound(text="no such sweep") from None


async def _index_main(app: web.Application) -> str:
    return await asyncio.to_thread(render_index, await app[WEB_SERVICE].list_sweeps())


async def _sweep_main(app: web.Application, sweep_id: int) -> str:
    # Rendered in a thread: the Markdown and the HTML are the page's CPU, not the loop's.
    return await asyncio.to_thread(render_main, await app[WEB_SERVICE].page(sweep_id))


async def _sweep_version(app: web.Application, sweep_id: int) -> object:
    """Changes whenever the sweep's page would: its state, its row, its latest event."""
    store = app[WEB_SERVICE].store
    sweep = await store.sweeps.get(sweep_id)
    return sweep.state, sweep.updated_at, await store.events.last_at(sweep_id)


async def _index_version(app: web.Application) -> object:
    """Every sweep's state and row, and the latest event of each one not ended."""
    store = app[WEB_SERVICE].store
    sweeps = await store.sweeps.all()
    return [(s.id, s.state, s.updated_at,
             await store.events.last_at(s.id) if s.state not in ENDED else None)
            for s in sweeps]


async def index(request: web.Request) -> web.Response:
    return _html(_live("sweepd: sweeps", await _index_main(request.app), back=False))


async def sweep_page(request: web.Request) -> web.Response:
    sweep_id = _sweep_id(request)
    try:
        data = await request.app[WEB_SERVICE].page(sweep_id)
    except NotFound:
        return _html(document("sweepd", f"<h1>No sweep {e(sweep_id)}</h1>"), status=404)
    return _html(_live(page_title(data), await asyncio.to_thread(render_main, data),
                       back=True))


async def _stream(request: web.Request, key: str, render: Callable[[], Awaitable[str]],
                  version: Callable[[], Awaitable[object]]) -> web.StreamResponse:
    """Each new rendering of the page as one `page` event (its HTML as JSON)."""
    feed = request.app[FEEDS].get(key, render, version)
    queue = feed.subscribe()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-store"})
    try:
        await response.prepare(request)
        while True:
            try:
                page = await asyncio.wait_for(queue.get(), PING_S)
            except TimeoutError:
                await response.write(b": ping\n\n")
                continue
            if not page:   # the feed closed (the daemon stops)
                break
            await response.write(f"event: page\ndata: {json.dumps({'html': page})}\n\n"
                                 .encode())
    except (ConnectionResetError, ConnectionError):
        pass   # the browser went away
    finally:
        feed.unsubscribe(queue)
        request.app[FEEDS].drop_idle()
    return response


async def index_events(request: web.Request) -> web.StreamResponse:
    app = request.app
    return await _stream(request, "index", lambda: _index_main(app),
                         lambda: _index_version(app))


async def sweep_events(request: web.Request) -> web.StreamResponse:
    sweep_id = _sweep_id(request)
    app = request.app
    await app[WEB_SERVICE].store.sweeps.get(sweep_id)   # NotFound before the stream starts
    return await _stream(request, f"sweep:{sweep_id}", lambda: _sweep_main(app, sweep_id),
                         lambda: _sweep_version(app, sweep_id))


@web.middleware
async def not_found(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except NotFound:
        return _html(document("sweepd", "<h1>No such sweep</h1>"), status=404)


def make_web_app(service: Service, token: str, settings: WebConfig) -> web.Application:
    app = web.Application(middlewares=[guard, not_found])
    app[WEB_SERVICE] = service
    app[TOKEN] = token
    app[NETWORKS] = tuple(ipaddress.ip_network(n, strict=False) for n in settings.allow)
    app[FEEDS] = Feeds(settings.refresh_s)

    async def on_shutdown(app: web.Application) -> None:
        await app[FEEDS].close()   # each stream ends, so a stopping daemon is not held

    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/", index)
    app.router.add_get("/events", index_events)
    app.router.add_get("/sweeps/{id}", sweep_page)
    app.router.add_get("/sweeps/{id}/events", sweep_events)
    return app


async def start_web(service: Service, config: Config) -> web.AppRunner:
    """The dashboard on `[web] listen`; the caller stops it with `runner.cleanup()`."""
    settings = config.web
    assert settings.listen is not None
    app = make_web_app(service, ensure_token(config.daemon.state_dir), settings)
    return await serve_tcp(app, settings.listen, shutdown_timeout=2.0)


def dashboard_url(settings: WebConfig, token: str) -> dict[str, Any]:
    """The URL `sweepd dashboard` prints (with the token), and the SSH tunnel to reach it
    from another machine."""
    assert settings.listen is not None
    host, _, port = settings.listen.rpartition(":")
    shown = host if host not in ("", "0.0.0.0", "::", "[::]") else "127.0.0.1"
    return {"url": f"http://{shown}:{port}/?token={token}",
            "tunnel": f"ssh -N -L {port}:{shown}:{port} THIS-HOST"}
