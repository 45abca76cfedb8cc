"""A synchronous client of the daemon's Unix-socket API (what the CLI verbs use): the
daemon-wide routes on `Client`, one sweep's reads on `client.reads` (`SweepReads`) and its
controls on `client.controls` (`SweepControls`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

DEFAULT_TIMEOUT_S = 30.0


class ClientError(Exception):
    """The daemon refused a request (status >= 400) or could not be reached (status 0)."""

    def __init__(self, status: int, message: str,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or []


def _not_running(path: Path) -> ClientError:
    return ClientError(0, f"sweepd is not running at {path} (start it with `sweepd serve`)")


def _error_from(response: httpx.Response) -> ClientError:
    try:
        body = json.loads(response.read())
        message, details = str(body["error"]), list(body.get("details") or [])
    except (ValueError, KeyError, TypeError):
        message, details = f"HTTP {response.status_code}: {response.text[:200]}", []
    return ClientError(response.status_code, message, details)


class Client:
    def __init__(self, socket_path: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self._http = httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)),
                                  base_url="http://sweepd", timeout=timeout_s)
        self.reads = SweepReads(self)
        self.controls = SweepControls(self)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if not self.socket_path.exists():
            raise _not_running(self.socket_path)
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.ConnectError:  # a stale socket file: nobody listens on it
            raise _not_running(self.socket_path) from None
        except httpx.TransportError as e:
            raise ClientError(0, f"lost the connection to sweepd at {self.socket_path}: "
                                 f"{e!r}") from None
        if response.status_code >= 400:
            raise _error_from(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    def _stream(self, sweep_id: int, after: int) -> Iterator[dict[str, Any]]:
        if not self.socket_path.exists():
            raise _not_running(self.socket_path)
        # No read timeout: a sweep may print nothing for a long while.
        timeout = httpx.Timeout(DEFAULT_TIMEOUT_S, read=None)
        try:
            with self._http.stream("GET", f"/sweeps/{sweep_id}/stream",
                                   params={"after": after}, timeout=timeout) as response:
                if response.status_code >= 400:
                    raise _error_from(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield dict(json.loads(line))
        except httpx.ConnectError:
            raise _not_running(self.socket_path) from None
        except httpx.TransportError as e:
            raise ClientError(0, f"lost the connection to sweepd at {self.socket_path}: "
                                 f"{e!r}") from None

    # -- the daemon-wide routes ----------------------------------------------------------

    def shutdown(self) -> dict[str, Any]:
        """Ask the daemon to stop cleanly (as SIGTERM does); it answers before it stops."""
        return dict(self._json("POST", "/shutdown"))

    def health(self) -> dict[str, Any]:
        return dict(self._json("GET", "/health"))

    def submit(self, spec: Any) -> dict[str, Any]:
        return dict(self._json("POST", "/sweeps", json=spec))

    def list_sweeps(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/sweeps"))

    def find_sweeps(self, states: Sequence[str] = (), kinds: Sequence[str] = (),
                    since: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        """Sweeps matching every filter given, newest first."""
        params: dict[str, str] = {"order": "newest"}
        if states:
            params["state"] = ",".join(states)
        if kinds:
            params["kind"] = ",".join(kinds)
        if since:
            params["since"] = since
        if user:
            params["user"] = user
        return list(self._json("GET", "/sweeps", params=params))

    def status(self) -> dict[str, Any]:
        return dict(self._json("GET", "/status"))

    def models(self) -> dict[str, Any]:
        return dict(self._json("GET", "/models"))

    def validate(self, spec: Any) -> dict[str, Any]:
        return dict(self._json("POST", "/validate", json=spec))


class SweepReads:
    """One sweep's read-only routes: what `show`, `report`, `explain`, `logs` and `watch`
    read (the ones `OfflineClient` also answers from a state directory)."""

    def __init__(self, client: Client) -> None:
        self._client = client   # the connection (and its refusals) these routes go through

    def show(self, sweep_id: int) -> dict[str, Any]:
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}"))

    def report(self, sweep_id: int) -> dict[str, Any]:
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}/report"))

    def report_markdown(self, sweep_id: int) -> str:
        return self._client._request("GET", f"/sweeps/{sweep_id}/report.md").text

    def plot(self, sweep_id: int) -> bytes | None:
        """The sweep's PNG, or None when its kind draws none (yet)."""
        try:
            return self._client._request("GET", f"/sweeps/{sweep_id}/plot.png").content
        except ClientError as e:
            if e.status == 404 and "no plot" in e.message:
                return None
            raise

    def explain(self, sweep_id: int) -> dict[str, Any]:
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}/explain"))

    def page(self, sweep_id: int) -> dict[str, Any]:
        """What the sweep's HTML page is rendered from (`Queries.page`)."""
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}/page"))

    def progress(self, sweep_id: int, after: int = 0, wait_s: float = 0.0) -> dict[str, Any]:
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}/progress",
                                       params={"after": after, "wait": wait_s},
                                       timeout=wait_s + DEFAULT_TIMEOUT_S))

    def stream(self, sweep_id: int, after: int = 0) -> Iterator[dict[str, Any]]:
        """Progress lines as they land; ends when the sweep stops or ends."""
        return self._client._stream(sweep_id, after)

    def job_log(self, sweep_id: int, which: str | None = None, offset: int = 0
                ) -> dict[str, Any]:
        params: dict[str, Any] = {"offset": offset}
        if which:
            params["job"] = which
        return dict(self._client._json("GET", f"/sweeps/{sweep_id}/log", params=params))


class SweepControls:
    """What a person does to one sweep: cancel, abort, resume."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def cancel(self, sweep_id: int) -> dict[str, Any]:
        return dict(self._client._json("POST", f"/sweeps/{sweep_id}/cancel"))

    def abort(self, sweep_id: int) -> dict[str, Any]:
        return dict(self._client._json("POST", f"/sweeps/{sweep_id}/abort"))

    def resume(self, sweep_id: int, exclude: Sequence[str] = (),
               readmit: Sequence[str] = ()) -> dict[str, Any]:
        body = {"exclude": list(exclude), "readmit": list(readmit)}
        return dict(self._client._json("POST", f"/sweeps/{sweep_id}/resume", json=body))
