"""The daemon's dashboard (`[web] listen`): a real `sweepd serve` on the simulated cluster,
asked over HTTP as a browser would, and opened in headless Chromium (Debian's package) while
its sweep runs. The token is required (401 without it), a peer off this host is refused
(403) unless configured, the token never reaches a page or the daemon's log, and the pages
are the sweep's own (its runs, its verdict) as they advance."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from sweepd.cli.client import Client
from sweepd.config import WebConfig
from sweepd.web.server import COOKIE, guard, make_web_app, peer_allowed
from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, write_scenario
from tests.support.service import free_port
from tests.web_pages import card

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _start(tmp_path: Path, time_scale: float = 0.002) -> tuple[Daemon, Client, int, str]:
    port = free_port()
    extra = f'\n[web]\nlisten = "127.0.0.1:{port}"\nrefresh_s = 0.3\n'
    config = write_config(tmp_path, write_scenario(tmp_path, time_scale=time_scale), extra)
    daemon = Daemon(tmp_path, config)
    client = daemon.start()
    return daemon, client, port, config.read_text()


def _token(tmp_path: Path) -> str:
    return (tmp_path / "state" / "web.token").read_text().strip()


def _wait(client: Client, sweep_id: int, test: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        shown = client.reads.show(sweep_id)
        if test(shown):
            return shown
        assert time.monotonic() < deadline, f"the sweep never {what}: {shown['state']}"
        time.sleep(0.2)


def test_the_dashboard_wants_its_token_and_keeps_it_out_of_pages_and_logs(
        tmp_path: Path) -> None:
    daemon, client, port, _ = _start(tmp_path)
    try:
        sweep_id = int(client.submit(perf_spec())["id"])
        _wait(client, sweep_id, lambda s: s["state"] == "done", "ended")
        token = _token(tmp_path)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as http:
            for path in ("/", f"/sweeps/{sweep_id}", f"/sweeps/{sweep_id}/events"):
                assert http.get(path).status_code == 401
                assert http.get(path, params={"token": "wrong"}).status_code == 401
                assert http.get(path, headers={"Cookie": f"{COOKIE}=wrong"}).status_code == 401
            # The token once in the query: kept in a cookie, taken out of the address.
            first = http.get(f"/sweeps/{sweep_id}", params={"token": token})
            assert first.status_code == 303
            assert first.headers["location"] == f"/sweeps/{sweep_id}"
            assert f"{COOKIE}={token}" in first.headers["set-cookie"]
            assert "HttpOnly" in first.headers["set-cookie"]
            http.cookies.clear()
            bearer = http.get("/", headers={"Authorization": f"Bearer {token}"})
            cookie = {"Cookie": f"{COOKIE}={token}"}
            page = http.get(f"/sweeps/{sweep_id}", headers=cookie)
            index = http.get("/", headers=cookie)
            # Read-only: no route changes anything.
            posted = http.post(f"/sweeps/{sweep_id}", headers=cookie)
            missing = http.get("/sweeps/999", headers=cookie)
        assert page.status_code == index.status_code == bearer.status_code == 200
        assert posted.status_code == 405 and missing.status_code == 404
        report = client.reads.report(sweep_id)["json"]
        verdict = report["verdict"]
        assert card(page.text)[0]["Deciding rule"] == verdict["rule"]
        assert page.text.count("<tr><td class=num>") == len(report["runs"])
        assert f'<a href="/sweeps/{sweep_id}">' in index.text and ">done<" in index.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for body in (page.text, index.text):
            assert token not in body
        # The daemon logs no URL and no header: the token is nowhere in its log.
        daemon.stop()
        log = daemon.log.read_text()
        assert "daemon.web" in log and token not in log
    finally:
        daemon.kill()


def test_a_peer_off_this_host_is_refused_unless_its_network_is_configured() -> None:
    assert peer_allowed("127.0.0.1", ()) and peer_allowed("::1", ())
    assert peer_allowed("::ffff:127.0.0.1", ())
    assert not peer_allowed("10.1.2.3", ()) and not peer_allowed(None, ())
    nets = tuple(__import__("ipaddress").ip_network(n) for n in ("10.1.0.0/16",))
    assert peer_allowed("10.1.2.3", nets) and not peer_allowed("10.2.0.1", nets)

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def status(allow: list[str], peer: str, token: str | None) -> int:
        app = make_web_app(mock.Mock(), "secret", WebConfig(allow=allow))
        transport = mock.Mock()
        transport.get_extra_info.side_effect = lambda key, default=None: (
            (peer, 5555) if key == "peername" else default)
        query = f"/?token={token}" if token else "/"
        request = make_mocked_request("GET", query, app=app, transport=transport)
        try:
            return (await guard(request, handler)).status
        except web.HTTPException as e:
            return e.status

    async def main() -> None:
        assert await status([], "10.1.2.3", "secret") == 403
        assert await status(["10.1.0.0/16"], "10.1.2.3", None) == 401
        assert await status(["10.1.0.0/16"], "10.1.2.3", "secret") == 303
        assert await status([], "127.0.0.1", "secret") == 303

    asyncio.run(main())


def test_the_live_stream_sends_the_sweeps_page_as_it_changes(tmp_path: Path) -> None:
    daemon, client, port, _ = _start(tmp_path, time_scale=0.005)
    try:
        sweep_id = int(client.submit(perf_spec())["id"])
        token = _token(tmp_path)
        seen: list[int] = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                          headers={"Cookie": f"{COOKIE}={token}"}) as http, \
                http.stream("GET", f"/sweeps/{sweep_id}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                html = json.loads(line[6:])["html"]
                assert f"Sweep {sweep_id}:" in html and token not in html
                seen.append(html.count("<tr><td class=num>"))
                if len(set(seen)) >= 2:
                    break
        assert seen[-1] > seen[0], seen   # a run more on the page, pushed, not reloaded
    finally:
        daemon.kill()


CHROMIUM = shutil.which("chromium")


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _runs_in(dom: str) -> int:
    return len(re.findall(r"<tr><td class=\"num\">", dom))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_chromium_opens_the_dashboard_of_a_running_sweep_and_sees_it_advance(
        tmp_path: Path) -> None:
    daemon, client, port, _ = _start(tmp_path, time_scale=0.005)
    try:
        sweep_id = int(client.submit(perf_spec())["id"])
        _wait(client, sweep_id, lambda s: s["progress"]["runs_done"] >= 1, "finished a run")
        url = f"http://127.0.0.1:{port}/sweeps/{sweep_id}?token={_token(tmp_path)}"
        first = _chromium("--dump-dom", url)
        assert f"Sweep {sweep_id}:" in first and 'id="verdict"' in first
        assert "<svg" in first   # the chart, inline
        before = _runs_in(first)
        _wait(client, sweep_id, lambda s: s["progress"]["runs_done"] >= before + 1,
              "finished another run")
        later = _chromium("--dump-dom", url)
        assert _runs_in(later) > before >= 1
        shot = tmp_path / "dashboard.png"
        _chromium(f"--screenshot={shot}", "--window-size=1100,1300", url)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        index = _chromium("--dump-dom", f"http://127.0.0.1:{port}/?token={_token(tmp_path)}")
        assert f'href="/sweeps/{sweep_id}"' in index
    finally:
        daemon.kill()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_the_html_report_opens_in_chromium_with_the_network_off(tmp_path: Path) -> None:
    """A finished sweep's `report --html` file, opened with every host unreachable: it
    renders whole (its chart inline), needing nothing from the network."""
    daemon, client, _, _ = _start(tmp_path)
    try:
        sweep_id = int(client.submit(perf_spec())["id"])
        _wait(client, sweep_id, lambda s: s["state"] == "done", "ended")
        page = tmp_path / "report.html"
        done = subprocess.run([sys.executable, "-m", "sweepd", "--socket", str(daemon.socket),
                               "report", str(sweep_id), "--html", str(page)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    finally:
        daemon.kill()
    off = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--disable-background-networking")
    dom = _chromium(*off, "--dump-dom", page.as_uri())
    assert "<svg" in dom and 'id="verdict"' in dom and "Decision timeline" in dom


def test_a_slow_browser_is_sent_the_latest_page_and_holds_nothing_older() -> None:
    from sweepd.web.live import Feed

    async def main() -> None:
        renders: list[int] = []

        async def render() -> str:
            renders.append(1)
            return "first"

        feed = Feed(render, refresh_s=3600)
        slow = feed.subscribe()
        for page in ("p1", "p2", "p3"):   # three renderings, the browser reads none
            feed.publish(page)
        assert slow.qsize() == 1 and slow.get_nowait() == "p3" and feed.dropped == 2
        late = feed.subscribe()           # one that arrives now gets the latest at once
        assert late.get_nowait() == "p3"
        await feed.close()                # each stream told to end, reading stopped
        assert slow.get_nowait() == "" and feed.watchers == 0

    asyncio.run(main())


def test_sweepd_dashboard_prints_the_url_with_the_token_or_says_it_is_off(
        tmp_path: Path) -> None:
    def dashboard(config: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sweepd", "dashboard", "--config",
                               str(config)], capture_output=True, text=True, timeout=60)

    off = tmp_path / "off.toml"
    off.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n')
    done = dashboard(off)
    assert done.returncode == 2 and "the dashboard is off" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    on = tmp_path / "on.toml"
    on.write_text(off.read_text() + '[web]\nlisten = "127.0.0.1:8765"\n')
    done = dashboard(on)
    token = _token(tmp_path)   # made by the first to need it, mode 0600
    assert (tmp_path / "state" / "web.token").stat().st_mode & 0o777 == 0o600
    url = urlsplit(done.stdout)
    assert done.returncode == 0 and done.stdout.count("\n") == 1 and done.stdout.endswith("\n")
    assert (url.scheme, url.netloc, url.path) == ("http", "127.0.0.1:8765", "/")
    assert parse_qs(url.query.strip()) == {"token": [token]}
    assert "ssh -N -L 8765:127.0.0.1:8765" in done.stderr
