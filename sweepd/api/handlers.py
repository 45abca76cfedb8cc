"""The API's handlers: thin, each parses its request (api/requests.py) and calls the
service; errors become JSON in `errors.error_middleware`. `add_routes` mounts them all,
`add_metrics_route` the Prometheus one alone (also served on its own TCP listener)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aiohttp import web

from sweepd.api.errors import ApiError
from sweepd.api.requests import (
    CLOSING,
    json_body,
    list_filters,
    node_list,
    query_number,
    service_of,
    submitter,
    sweep_id_of,
)
from sweepd.store.rows import Event
from sweepd.store.states import SweepState

MAX_WAIT_S = 30.0
# How long one stream pass waits for new lines before it re-reads the sweep's state.
STREAM_POLL_S = 5.0
# The sweep states after which no progress line comes without a person acting.
STOPPED = frozenset({SweepState.DONE, SweepState.FAILED, SweepState.ABORTED,
                     SweepState.AWAITING_DECISION})


def progress_dict(event: Event) -> dict[str, Any]:
    return {"id": event.id, "at": event.at, "reason": event.reason}


async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "recovered": service_of(request).health.recovered})


async def submit(request: web.Request) -> web.Response:
    data = await json_body(request)
    return web.json_response(await service_of(request).submit(data, submitter(request)),
                             status=201)


async def list_sweeps(request: web.Request) -> web.Response:
    if request.query:   # filters (or an order) given: newest first
        return web.json_response(await service_of(request).find_sweeps(**list_filters(request)))
    return web.json_response(await service_of(request).list_sweeps())


async def show(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).show(sweep_id_of(request)))


async def report(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).report(sweep_id_of(request)))


async def report_md(request: web.Request) -> web.Response:
    out = await service_of(request).report(sweep_id_of(request))
    return web.Response(text=out["markdown"], content_type="text/markdown")


async def page(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).page(sweep_id_of(request)))


async def plot(request: web.Request) -> web.Response:
    png = await service_of(request).plot(sweep_id_of(request))
    if png is None:
        raise ApiError(404, "no plot for this sweep (its kind draws none, or nothing ran yet)")
    return web.Response(body=png, content_type="image/png")


async def explain(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).explain(sweep_id_of(request)))


async def cancel(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).cancel(sweep_id_of(request)))


async def abort(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).abort(sweep_id_of(request)))


async def resume(request: web.Request) -> web.Response:
    """Optional body `{"exclude": [...], "readmit": [...]}`: nodes to add to the sweep's
    exclusions, and excluded nodes to put back in use (hostlist expressions)."""
    sweep_id = sweep_id_of(request)
    body = await json_body(request, optional=True)
    if body is None:
        body = {}
    if not isinstance(body, dict) or set(body) - {"exclude", "readmit"}:
        raise ApiError(400, 'resume takes an optional body {"exclude": ["node", ...], '
                            '"readmit": ["node", ...]}')
    return web.json_response(await service_of(request).resume(
        sweep_id, node_list(body, "exclude"), node_list(body, "readmit")))


async def progress(request: web.Request) -> web.Response:
    sweep_id = sweep_id_of(request)
    after = int(query_number(request, "after", 0, 0, 2**62))
    wait_s = query_number(request, "wait", 0.0, 0.0, MAX_WAIT_S)
    events = await service_of(request).progress(sweep_id, after, wait_s)
    return web.json_response({"events": [progress_dict(e) for e in events],
                              "last": events[-1].id if events else after})


async def stream(request: web.Request) -> web.StreamResponse:
    """NDJSON progress lines until the sweep stops (or the client or the server goes)."""
    service = service_of(request)
    sweep_id = sweep_id_of(request)
    after = int(query_number(request, "after", 0, 0, 2**62))
    await service.store.sweeps.get(sweep_id)  # NotFound -> 404 before the stream starts
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    closing = request.app[CLOSING]
    with contextlib.suppress(ConnectionResetError):
        while not closing.is_set():
            # State first, then lines: a line written with the stopping transition is
            # still sent before the stream ends.
            state = (await service.store.sweeps.get(sweep_id)).state
            events = await service.progress(sweep_id, after, 0 if state in STOPPED
                                            else STREAM_POLL_S)
            for event in events:
                await response.write(json.dumps(progress_dict(event)).encode() + b"\n")
                after = event.id
            if state in STOPPED:
                break
        await response.write_eof()
    return response


async def job_log(request: web.Request) -> web.Response:
    sweep_id = sweep_id_of(request)
    offset = int(query_number(request, "offset", 0, 0, 2**62))
    which = request.query.get("job")
    return web.json_response(await service_of(request).job_log(sweep_id, which, offset))


async def shutdown(request: web.Request) -> web.Response:
    return web.json_response(service_of(request).request_stop())


async def status(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).health.status())


async def validate(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).validate(await json_body(request)))


async def models(request: web.Request) -> web.Response:
    return web.json_response(service_of(request).models())


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format, read from the store now (see sweepd.core.metrics)."""
    from sweepd.core.metrics import CONTENT_TYPE, exposition

    service = service_of(request)
    body = await exposition(service.store, service.engine.backend)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def add_metrics_route(app: web.Application) -> None:
    app.router.add_get("/metrics", metrics)


def add_routes(app: web.Application) -> None:
    """Every route of the socket API."""
    app.router.add_get("/health", health)
    add_metrics_route(app)
    app.router.add_post("/sweeps", submit)
    app.router.add_get("/sweeps", list_sweeps)
    app.router.add_get("/sweeps/{id}", show)
    app.router.add_get("/sweeps/{id}/report", report)
    app.router.add_get("/sweeps/{id}/report.md", report_md)
    app.router.add_get("/sweeps/{id}/explain", explain)
    app.router.add_get("/sweeps/{id}/plot.png", plot)
    app.router.add_get("/sweeps/{id}/page", page)
    app.router.add_get("/sweeps/{id}/progress", progress)
    app.router.add_get("/sweeps/{id}/stream", stream)
    app.router.add_post("/sweeps/{id}/cancel", cancel)
    app.router.add_post("/sweeps/{id}/resume", resume)
    app.router.add_post("/sweeps/{id}/abort", abort)
    # The CLI's views: status, models, validate, a job's log.
    app.router.add_get("/status", status)
    app.router.add_post("/shutdown", shutdown)
    app.router.add_get("/models", models)
    app.router.add_post("/validate", validate)
    app.router.add_get("/sweeps/{id}/log", job_log)
