"""The socket API client `sweepd top` uses: the few routes it reads and acts through,
asynchronously (it runs in textual's loop), each refusal or unreachable daemon an `ApiError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

LONG_POLL_S = 25.0        # one progress long-poll; the API caps it at 30 s


class ApiError(Exception):
    """The daemon refused a request or could not be reached."""


class Api:
    """The few socket routes the view uses, asynchronously (it runs in textual's loop)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._http = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(socket_path)),
                                       base_url="http://sweepd", timeout=LONG_POLL_S + 30)

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kw)
        except httpx.ConnectError:   # no socket file, or nobody listens on it: one line
            raise ApiError(f"daemon not running at {self.socket_path}; start it with "
                           "sweepd serve") from None
        except httpx.TransportError as e:
            raise ApiError(f"lost the connection to sweepd at {self.socket_path} "
                           f"({type(e).__name__})") from None
        if response.status_code >= 400:
            try:
                message = str(response.json()["error"])
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {response.status_code}"
            raise ApiError(message)
        return response

    async def sweeps(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/sweeps")).json())

    async def show(self, sweep_id: int) -> dict[str, Any]:
        return dict((await self._call("GET", f"/sweeps/{sweep_id}")).json())

    async def progress(self, sweep_id: int, after: int, wait_s: float) -> dict[str, Any]:
        return dict((await self._call("GET", f"/sweeps/{sweep_id}/progress",
                                      params={"after": after, "wait": wait_s})).json())

    async def explain(self, sweep_id: int) -> list[str]:
        return list((await self._call("GET", f"/sweeps/{sweep_id}/explain")).json()["lines"])

    async def report(self, sweep_id: int) -> str:
        return (await self._call("GET", f"/sweeps/{sweep_id}/report.md")).text

    async def act(self, sweep_id: int, verb: str) -> dict[str, Any]:
        return dict((await self._call("POST", f"/sweeps/{sweep_id}/{verb}")).json())
