"""An aiohttp application served on a TCP `host:port` (the metrics listener and the
dashboard): one place that starts it and, when the address cannot be bound, cleans up
before the error leaves."""

from __future__ import annotations

from aiohttp import web


async def serve_tcp(app: web.Application, listen: str, shutdown_timeout: float
                    ) -> web.AppRunner:
    """`app` on `listen` (`host:port`, `[v6]:port`, or `:port` for every address); the
    caller stops it with `runner.cleanup()`."""
    host, _, port = listen.rpartition(":")
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host.strip("[]") or None, int(port)).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
