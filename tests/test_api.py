"""The socket API against a real store, engine and service, served on a real Unix socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from sweepd.api.server import start_server
from sweepd.core.states import SweepState
from sweepd.store.rows import RunParams
from tests.golden_files import GOLDEN, check_golden_cases
from tests.support.service import MAX_BODY, NODES, SPEC, Api, serve_service


async def submit(api: Api, spec: dict[str, Any] | None = None) -> int:
    status, body = await api.call("POST", "/sweeps", json=spec or SPEC)
    assert status == 201, body
    return int(body["id"])


async def test_submit_list_show(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", json=SPEC)
    assert status == 201
    assert body["state"] == "queued" and body["kind"] == "model-perf"
    assert "llama2-70b" in body["name"]
    status, sweeps = await api.call("GET", "/sweeps")
    assert status == 200 and [s["id"] for s in sweeps] == [body["id"]]
    status, shown = await api.call("GET", f"/sweeps/{body['id']}")
    assert status == 200
    assert shown["spec"]["nodes"] == NODES and shown["run_list"] == []
    assert shown["events"][0]["reason"] == "sweep submitted"


async def test_report_and_explain(api: Api) -> None:
    sweep_id = await submit(api)
    status, report = await api.call("GET", f"/sweeps/{sweep_id}/report")
    assert status == 200
    assert report["markdown"].startswith(f"# Sweep {sweep_id}")
    assert "No run has finished yet." in report["markdown"] and "| Batch" not in report["markdown"]
    assert report["json"]["sweep"]["id"] == sweep_id
    async with api.http.get(f"http://sweepd/sweeps/{sweep_id}/report.md") as r:
        assert r.status == 200 and r.content_type == "text/markdown"
        assert (await r.text()) == report["markdown"]
    status, explain = await api.call("GET", f"/sweeps/{sweep_id}/explain")
    assert status == 200
    assert any("sweep submitted" in line for line in explain["lines"])
    assert explain["events"][0]["to_state"] == "queued"


async def test_health_and_unknown_route(api: Api) -> None:
    # A service no daemon ran a recovery pass for says so.
    assert await api.call("GET", "/health") == (200, {"ok": True, "recovered": False})
    status, body = await api.call("GET", "/nope")
    assert status == 404 and "no such route" in body["error"]
    status, body = await api.call("DELETE", "/sweeps")
    assert status == 405 and "error" in body


async def test_bad_json_is_400(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", data=b"{kind: ",
                                  headers={"Content-Type": "application/json"})
    assert status == 400 and body["details"]
    check_golden_cases(GOLDEN / "api" / "bad_json.txt", {"error": body["error"]})


async def test_spec_errors_are_422_with_locations(api: Api) -> None:
    bad = {**SPEC, "max_runs": 0, "nodes": "chi[1-"}
    status, body = await api.call("POST", "/sweeps", json=bad)
    assert status == 422
    locs = {tuple(d["loc"]) for d in body["details"]}
    assert ("max_runs",) in locs and ("nodes",) in locs
    status, body = await api.call("POST", "/sweeps", json=[1, 2])
    assert status == 422 and "mapping" in body["error"]


@pytest.mark.parametrize(("field", "value"), [
    ("values", [float("nan")]), ("values", [float("inf")]), ("values", [8, True]),
    ("values", [8, 8]), ("steps", True), ("steps", 2), ("overrides", {"remat_policy": True}),
])
async def test_specs_that_cannot_run_are_422(api: Api, field: str, value: Any) -> None:
    status, body = await api.call("POST", "/sweeps",
                                  data=json.dumps({**SPEC, field: value}).encode(),
                                  headers={"Content-Type": "application/json"})
    assert status == 422, body
    detail = body["details"][0]
    assert detail["loc"][:1] == [field] or field in detail["msg"]   # cross-field checks: no loc
    status, sweeps = await api.call("GET", "/sweeps")
    assert sweeps == []


@pytest.mark.parametrize(("change", "says"), [
    ({"parameter": "max_target_length"}, "values are needed for max_target_length"),
    ({"parameter": "per_device_batchsize"}, "only per_device_batch_size has a memory-guided"),
    ({"values": [8, "x"]}, "values mix numbers and text"),
    ({"values": [8, -1]}, "whole numbers of at least 1"),
    ({"values": [8, 12.5]}, "whole numbers of at least 1"),
    ({"model": "grok-1", "nodes": "chi[2832,2863]"}, "grok-1 needs at least 8 nodes; 2 pinned"),
    ({"kind": "node-perf", "model": "llama2-70b", "nodes": "chi[2832,2863]"},
     "the median of 2 node(s) cannot single out a slow one"),
    ({"env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": 0.93}},
     'env values are text; quote it (XLA_PYTHON_CLIENT_MEM_FRACTION: "0.93")'),
    ({"env": {"EMPTY": None}}, 'EMPTY: env values are text; quote it (EMPTY: "")'),
])
async def test_a_spec_whose_values_or_nodes_cannot_answer_is_422(
        api: Api, change: dict[str, Any], says: str) -> None:
    status, body = await api.call("POST", "/sweeps", json={**SPEC, **change})
    assert status == 422 and says in body["error"], body
    status, sweeps = await api.call("GET", "/sweeps")
    assert sweeps == []


async def test_sweepable_parameters_with_values_and_small_node_perf_with_a_reference(
        api: Api) -> None:
    for spec in ({**SPEC, "parameter": "remat_policy", "values": ["full", "minimal"]},
                 {**SPEC, "model": "grok-1", "nodes": "chi[2832,2863]", "min_nodes": 2},
                 {"kind": "node-perf", "nodes": "chi[2832,2863]", "reference_tgs": 1400.0}):
        status, body = await api.call("POST", "/sweeps", json=spec)
        assert status == 201, body


async def test_a_spec_naming_a_missing_or_wrong_sweep_is_422(api: Api) -> None:
    status, first = await api.call("POST", "/sweeps", json=SPEC)
    assert status == 201
    for bad, says in [
        ({"kind": "network", "nodes": NODES, "node_perf_sweep": 999}, "does not exist"),
        ({"kind": "network", "nodes": NODES, "node_perf_sweep": first["id"]},
         "not a finished node perf sweep"),
        ({"kind": "model-sweep", "nodes": NODES, "compare_to": 999}, "does not exist"),
        ({"kind": "model-sweep", "nodes": NODES, "compare_to": first["id"]},
         "is a model-perf sweep"),
    ]:
        status, body = await api.call("POST", "/sweeps", json=bad)
        assert status == 422 and says in body["error"], (bad, body)
    status, sweeps = await api.call("GET", "/sweeps")
    assert [s["id"] for s in sweeps] == [first["id"]]   # nothing else was recorded


async def test_a_node_the_cluster_does_not_have_is_422(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "nodes": "chi[2832,9001-9002]"})
    assert status == 422
    # One compact detail, however many nodes: a typo may name thousands.
    assert [d["loc"] for d in body["details"]] == [["nodes"]]
    check_golden_cases(GOLDEN / "api" / "not_nodes_of_this_cluster.txt", {
        "error": body["error"], "detail": body["details"][0]["msg"]})
    status, sweeps = await api.call("GET", "/sweeps")
    assert sweeps == []


async def test_unknown_model_names_the_known_ones(api: Api) -> None:
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "model": "llama9-1t"})
    assert status == 422
    assert body["details"][0]["loc"] == ["model"]
    assert "llama2-70b" in body["details"][0]["msg"]


async def test_unknown_and_non_integer_ids_are_404(api: Api) -> None:
    for path in ("/sweeps/99", "/sweeps/99/report", "/sweeps/abc", "/sweeps/1x/explain",
                 "/sweeps/-1/progress", "/sweeps/99/explain", "/sweeps/%C2%B2",
                 "/sweeps/%D9%A3", "/sweeps/99999999999999999999999"):
        status, body = await api.call("GET", path)
        assert status == 404, path
        assert "not found" in body["error"]
    status, body = await api.call("POST", "/sweeps/99/abort")
    assert status == 404


async def test_oversized_body_is_413(api: Api) -> None:
    big = {**SPEC, "name": "x" * (MAX_BODY + 10)}
    status, body = await api.call("POST", "/sweeps", json=big)
    assert status == 413 and "too large" in body["error"]
    status, sweeps = await api.call("GET", "/sweeps")
    assert sweeps == []


async def test_resume_of_queued_sweep_is_409(api: Api) -> None:
    sweep_id = await submit(api)
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume")
    assert status == 409 and "awaiting a decision" in body["error"]


async def test_resume_sets_exclusions(api: Api) -> None:
    sweep_id = await submit(api)
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started")
    await api.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop rule")
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume", json={"exclude": 3})
    assert status == 422 and body["details"][0]["loc"] == ["exclude"]
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"exclude": ["chi2863", "zzz9"]})   # not a node of ours
    assert status == 422 and "zzz9" in body["error"]
    assert (await api.store.sweeps.get(sweep_id)).state == SweepState.AWAITING_DECISION
    assert await api.store.exclusions.of_sweep(sweep_id) == []
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"exclude": ["chi[2863,2867]"]})
    assert status == 200 and body["state"] == "running"
    excluded = await api.store.exclusions.of_sweep(sweep_id)
    assert [e.node for e in excluded] == ["chi2863", "chi2867"]
    # A later stop: `exclude` adds (a node a fault excluded never returns by accident) and
    # only `readmit` puts one back.
    await api.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop rule")
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"exclude": ["chi2870"]})
    assert status == 200 and body["excluded"] == ["chi2863", "chi2867", "chi2870"]
    await api.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop rule")
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"readmit": ["chi2863", "chi2880"]})   # 2880: a typo
    assert status == 422 and "has not excluded chi2880" in body["error"], body
    assert (await api.store.sweeps.get(sweep_id)).state == SweepState.AWAITING_DECISION
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/resume",
                                  json={"readmit": ["chi2863"]})
    assert status == 200 and body["excluded"] == ["chi2867", "chi2870"]


async def test_abort_then_abort_again(api: Api) -> None:
    sweep_id = await submit(api)
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/abort")
    assert status == 200 and body["state"] == "aborted"
    status, body = await api.call("POST", f"/sweeps/{sweep_id}/cancel")
    assert status == 409 and "already aborted" in body["error"]


async def test_progress_long_poll_returns_events_after(api: Api) -> None:
    sweep_id = await submit(api)
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started",
                                            progress="first line")
    status, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?after=0")
    assert status == 200 and [e["reason"] for e in body["events"]] == ["first line"]
    last = body["last"]

    async def later() -> None:
        await asyncio.sleep(0.05)
        await api.store.events.add(sweep_id, "progress", "second line")
        api.service.engine.changed.set()

    task = asyncio.create_task(later())
    status, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?after={last}&wait=10")
    await task
    assert status == 200 and [e["reason"] for e in body["events"]] == ["second line"]
    assert body["last"] == body["events"][0]["id"] > last
    status, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?after={body['last']}")
    assert body == {"events": [], "last": body["last"]}
    status, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?wait=31")
    assert status == 400 and body["details"][0]["loc"] == ["query", "wait"]


async def test_progress_never_sends_a_line_of_a_transaction_still_open(api: Api) -> None:
    # The engine writes a line in a transaction; the daemon stops before it commits (the
    # pass is cancelled: rolled back). A watcher sent that line would resume after its id,
    # and the line written again after the restart reuses the id: a gap.
    sweep_id = await submit(api)
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started", progress="one")
    _, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?after=0")
    last = body["last"]
    opened, stop = asyncio.Event(), asyncio.Event()

    async def pass_cancelled() -> None:
        with contextlib.suppress(RuntimeError):
            async with api.store.tx():
                await api.store.events.add(sweep_id, "progress", "never committed")
                opened.set()
                await stop.wait()
                raise RuntimeError("the daemon stopped mid-pass")

    engine = asyncio.create_task(pass_cancelled())
    await opened.wait()
    read = asyncio.create_task(api.service.progress(sweep_id, last))
    # The read answers at once if it sees the open transaction's line (it did); it waits
    # for the transaction to end otherwise. The content is asserted, not the time.
    await asyncio.wait({read}, timeout=1.0)
    stop.set()
    await engine
    assert [e.reason for e in await read] == []
    await api.store.events.add(sweep_id, "progress", "two")
    _, body = await api.call("GET", f"/sweeps/{sweep_id}/progress?after={last}")
    assert [e["reason"] for e in body["events"]] == ["two"]


async def test_stream_ends_when_sweep_stops(api: Api) -> None:
    sweep_id = await submit(api)
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started", progress="one")

    async def finish() -> None:
        await asyncio.sleep(0.05)
        await api.store.sweeps.transition(sweep_id, SweepState.AWAITING_DECISION, "stop",
                                                progress="stopped: decide")
        api.service.engine.changed.set()

    task = asyncio.create_task(finish())
    async with api.http.get(f"http://sweepd/sweeps/{sweep_id}/stream") as r:
        assert r.status == 200 and r.content_type == "application/x-ndjson"
        lines = [json.loads(line) async for line in r.content if line.strip()]
    await task
    assert [e["reason"] for e in lines] == ["one", "stopped: decide"]
    status, body = await api.call("GET", "/sweeps/99/stream")
    assert status == 404 and body["error"] == "sweep 99 not found"


async def test_unexpected_exception_is_logged_500(api: Api, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    async def boom() -> list[dict[str, Any]]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(api.service, "list_sweeps", boom)
    with capture_logs() as logs:
        status, body = await api.call("GET", "/sweeps")
    assert status == 500 and "RuntimeError" in body["error"]
    assert "disk on fire" not in body["error"]
    assert any(e["event"] == "api.error" and e["path"] == "/sweeps" for e in logs)
    assert (await api.call("GET", "/health"))[0] == 200


async def test_garbage_on_the_socket_does_not_kill_the_server(api: Api) -> None:
    for junk in (b"\x00\xff\x13garbage\r\n\r\n", b"GET / HTTP/9.9\r\nHost: \xff\r\n\r\n",
                 b"POST /sweeps HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
        reader, writer = await asyncio.open_unix_connection(str(api.socket))
        writer.write(junk)
        await writer.drain()
        reply = await reader.read(4096)
        writer.close()
        await writer.wait_closed()
        assert reply == b"" or re.match(rb"HTTP/1\.[01] 4\d\d ", reply), reply
    # A client that connects and leaves without a word.
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(api.socket))
    status, _ = await api.call("GET", "/health")
    assert status == 200
    assert await submit(api) == 1


async def test_second_server_refuses_a_live_socket(api: Api) -> None:
    with pytest.raises(RuntimeError, match="already serving"):
        await start_server(api.service, api.socket)


async def test_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    sock = tmp_path / "sweepd.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))  # bound, never listening: what a killed daemon leaves
    async with serve_service(tmp_path) as (_service, _store, path), \
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(path))) as http, \
            http.get("http://sweepd/health") as r:
        assert r.status == 200
    assert not sock.exists()  # a clean stop removes its socket



async def test_updated_moves_with_what_happens_to_a_running_sweep(api: Api) -> None:
    sweep_id = await submit(api)
    await api.store.sweeps.transition(sweep_id, SweepState.RUNNING, "started")
    _, before = await api.call("GET", f"/sweeps/{sweep_id}")
    await asyncio.sleep(0.01)   # the store's clock has millisecond steps
    await api.store.runs.add(sweep_id, "b=4",
                                 RunParams(overrides={"per_device_batch_size": 4}), NODES, "probe")
    _, after = await api.call("GET", f"/sweeps/{sweep_id}")
    assert after["state"] == "running" and after["updated_at"] > before["updated_at"]
