"""Every API error is JSON `{"error": str, "details": [...]}`, whatever raised it.

One middleware maps the domain's exceptions to statuses, so the handlers stay free of
try/except, and an unexpected exception becomes a logged 500 instead of a dead server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

# Raised by the daemon (`app/daemon.py`, which the API never reaches back into); here too,
# where the API's callers knew it.
from sweepd.app.daemon import AnotherSweepd as AnotherSweepd
from sweepd.kinds.spec import SpecError
from sweepd.store.store import InvalidTransition, NotFound

log = structlog.get_logger("sweepd.api")


class ApiError(Exception):
    """A request the API refuses, with the status to answer."""

    def __init__(self, status: int, message: str,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


# An error answer stays small whatever caused it (a typo's hostlist may name 100,000
# nodes): a person reads it, and a client prints it.
MAX_MESSAGE_CHARS = 2000
MAX_DETAILS = 20


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else f"{text[:MAX_MESSAGE_CHARS]}… (cut)"


def bounded_details(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{**d, "msg": _cut(str(d.get("msg", "")))} for d in details[:MAX_DETAILS]]
    if len(details) > MAX_DETAILS:
        out[-1] = {"loc": [], "msg": f"… and {len(details) - MAX_DETAILS + 1} more problems"}
    return out


def error_response(status: int, message: str,
                   details: list[dict[str, Any]] | None = None) -> web.Response:
    body: dict[str, Any] = {"error": _cut(message)}
    if details is not None:
        body["details"] = bounded_details(details)
    return web.json_response(body, status=status)


def _http_message(e: web.HTTPException, request: web.Request) -> str:
    if isinstance(e, web.HTTPNotFound):
        return f"no such route: {request.method} {request.path}"
    if isinstance(e, web.HTTPMethodNotAllowed):
        return f"{request.method} is not allowed on {request.path}"
    if isinstance(e, web.HTTPRequestEntityTooLarge):
        return f"request body too large (limit {request.client_max_size} bytes)"
    return e.reason


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e.status, e.message, e.details)
    except SpecError as e:
        return error_response(422, str(e), e.errors)
    except NotFound as e:
        return error_response(404, str(e))
    except InvalidTransition as e:
        return error_response(409, str(e))
    except web.HTTPException as e:
        if e.status < 400:  # redirects and the like pass through untouched
            raise
        return error_response(e.status, _http_message(e, request))
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away or the server is stopping: nothing to answer
    except Exception as e:
        log.exception("api.error", method=request.method, path=request.path,
                      error=type(e).__name__)
        return error_response(500, f"internal error ({type(e).__name__}); see the daemon log")
