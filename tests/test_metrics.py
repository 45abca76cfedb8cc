"""Prometheus metrics: scraped from a real daemon (on the socket and on its TCP listener),
parsed with the Prometheus text parser, and checked against the store."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sweepd.cli.client import Client
from sweepd.config import ConfigError, load_config
from tests.daemon_proc import Daemon, write_config
from tests.simrun import perf_spec, write_scenario
from tests.support.service import free_port

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]




def parse(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape_socket(path: Path) -> str:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as http:
        r = http.get("http://sweepd/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return r.text


def wait_state(client: Client, sweep_id: int, states: set[str]) -> None:
    deadline = time.monotonic() + 90
    while client.reads.show(sweep_id)["state"] not in states:
        assert time.monotonic() < deadline, "the sweep did not get there"
        time.sleep(0.1)


def store_rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return list(conn.execute(sql))


@pytest.fixture
def stopped_daemon(tmp_path: Path) -> tuple[Daemon, Client, int, int]:
    """A daemon whose one sweep stopped for a decision after two nodes were excluded (a GPU
    fault on each of three nodes; the third exclusion is the stop)."""
    faults = [{"kind": "hsa_error", "node": n, "times": 1}
              for n in ("chi2832", "chi2863", "chi2867")]
    port = free_port()
    extra = f'\n[policy]\nmax_retries = 5\n\n[metrics]\nlisten = "127.0.0.1:{port}"\n'
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path, faults), extra))
    client = daemon.start()
    sweep_id = int(client.submit(perf_spec(values=[8]))["id"])
    wait_state(client, sweep_id, {"awaiting_decision", "done", "failed"})
    return daemon, client, sweep_id, port


def test_metrics_on_socket_and_tcp_match_the_store(
        tmp_path: Path, stopped_daemon: tuple[Daemon, Client, int, int]) -> None:
    daemon, client, sweep_id, port = stopped_daemon
    try:
        assert client.reads.show(sweep_id)["state"] == "awaiting_decision"
        got = parse(scrape_socket(daemon.socket))
        db = tmp_path / "state" / "sweepd.db"
        assert got[("sweepd_sweeps", (("kind", "model-perf"), ("state", "awaiting_decision")))] \
            == 1
        for state, count in store_rows(db, "SELECT state, count(*) FROM jobs GROUP BY state"):
            assert got[("sweepd_jobs", (("kind", "model-perf"), ("state", str(state))))] == count
        failures = store_rows(db, "SELECT count(*) FROM jobs WHERE failure_class = "
                                  "'gpu_hardware'")[0][0]
        assert failures >= 2 and got[("sweepd_job_failures_total",
                                      (("class", "gpu_hardware"),))] == failures
        assert got[("sweepd_exclusions", (("by", "fault"),))] == len(
            store_rows(db, "SELECT node FROM exclusions WHERE active = 1"))
        assert got[("sweepd_awaiting_decision", ())] == 1
        waited = got[("sweepd_awaiting_decision_seconds",
                      (("kind", "model-perf"), ("sweep", str(sweep_id))))]
        assert 0 <= waited < 3600
        assert got[("sweepd_controller_reachable", ())] == 1
        assert got[("sweepd_delivery_backlog", ())] >= 0   # the log sink drains it meanwhile
        assert got[("sweepd_delivery_failures_total", ())] == 0   # the log sink never fails
        # The timings were filled by the passes, the scheduler calls and the log reads.
        assert got[("sweepd_engine_pass_seconds_count", ())] > 0
        assert got[("sweepd_scheduler_call_seconds_count", (("op", "submit"),
                                                            ("outcome", "ok")))] == len(
            store_rows(db, "SELECT id FROM jobs WHERE backend_id IS NOT NULL"))
        assert got[("sweepd_line_to_stored_seconds_count", ())] > 0
        # The TCP listener serves the same metrics, and nothing else of the API.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            tcp = parse(http.get("/metrics").text)
            assert http.get("/sweeps").status_code == 404
        assert tcp[("sweepd_awaiting_decision", ())] == 1
        assert tcp[("sweepd_job_failures_total", (("class", "gpu_hardware"),))] == failures
    finally:
        daemon.kill()


def test_finished_runs_show_up(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path)))
    try:
        client = daemon.start()
        sweep_id = int(client.submit(perf_spec(values=[4, 8]))["id"])
        wait_state(client, sweep_id, {"done", "failed", "awaiting_decision"})
        got = parse(scrape_socket(daemon.socket))
        db = tmp_path / "state" / "sweepd.db"
        passed = store_rows(db, "SELECT count(*) FROM runs WHERE state = 'passed'")[0][0]
        assert passed == 2
        assert got[("sweepd_runs_finished_total",
                    (("kind", "model-perf"), ("state", "passed")))] == passed
        assert got[("sweepd_sweeps", (("kind", "model-perf"), ("state", "done")))] == 1
        assert got[("sweepd_awaiting_decision", ())] == 0
        assert not [k for k in got if k[0] == "sweepd_awaiting_decision_seconds"]
    finally:
        daemon.kill()


def test_metrics_listen_must_be_host_and_port() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listen"):
        load_config(None, {"metrics.listen": "9464"})
    assert load_config(None, {"metrics.listen": "[::1]:9464"}).metrics.listen == "[::1]:9464"
    assert load_config(None).metrics.listen is None   # off by default


def test_a_taken_metrics_port_refuses_the_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        extra = f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n'
        daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path), extra))
        with pytest.raises(AssertionError, match="cannot listen there"):
            daemon.start()
        daemon.kill()


async def test_a_start_refused_for_its_metrics_port_never_listened_on_its_socket(
        tmp_path: Path) -> None:
    # The socket listened for a moment before the port was refused: a client probing then
    # took the daemon for started (test_a_taken_metrics_port_refuses_the_start, under load).
    from dataclasses import replace

    from sweepd.api.server import FRONT
    from sweepd.app.daemon import serve

    real = FRONT.start_metrics
    socket_seen: list[bool] = []

    async def watched(*args: object) -> object:
        socket_seen.append((tmp_path / "sweepd.sock").exists())
        return await real(*args)  # type: ignore[arg-type]

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        extra = f'\n[metrics]\nlisten = "127.0.0.1:{taken.getsockname()[1]}"\n'
        config = load_config(write_config(tmp_path, write_scenario(tmp_path), extra))
        with pytest.raises(ConfigError, match="cannot listen there"):
            await serve(config, asyncio.Event(),
                        front=replace(FRONT, start_metrics=watched))  # type: ignore[arg-type]
    assert socket_seen == [False]


def test_an_unreachable_controller_shows(tmp_path: Path) -> None:
    """The scheduler stops answering (a long outage; the sweep waits): reachability 0 and
    the failed calls counted as unreachable."""
    faults = [{"kind": "controller_down", "seconds": 1e6}]
    extra = "\n[policy]\ncontroller_down_limit_s = 1e9\n"
    daemon = Daemon(tmp_path, write_config(tmp_path, write_scenario(tmp_path, faults), extra))
    try:
        client = daemon.start()
        sweep_id = int(client.submit(perf_spec(values=[8]))["id"])
        deadline = time.monotonic() + 60
        while not any(e["rule"] == "controller.wait"
                      for e in client.reads.show(sweep_id)["events"]):
            assert time.monotonic() < deadline, "the outage never began"
            time.sleep(0.1)
        got = parse(scrape_socket(daemon.socket))
        assert got[("sweepd_controller_reachable", ())] == 0
        assert got[("sweepd_scheduler_call_seconds_count",
                    (("op", "poll"), ("outcome", "unreachable")))] >= 1
        assert got[("sweepd_sweeps", (("kind", "model-perf"), ("state", "running")))] == 1
    finally:
        daemon.kill()


def test_observing_many_values_at_once_counts_as_observing_each() -> None:
    """The log pass's latencies go into the histogram as one update per bucket: the same
    buckets, count and sum as one `observe` per value, a value on a bound included."""
    from prometheus_client import CollectorRegistry, Histogram

    from sweepd.core.metrics import observe_many

    values = [0.0, 0.05, 0.07, 0.1, 0.3, 0.3, 2.0, 400.0]
    one, many = CollectorRegistry(), CollectorRegistry()
    each = Histogram("h", "h", registry=one, buckets=(0.05, 0.1, 0.25, 1, 300))
    at_once = Histogram("h", "h", registry=many, buckets=(0.05, 0.1, 0.25, 1, 300))
    for v in values:
        each.observe(v)
    observe_many(at_once, values)
    observe_many(at_once, [])

    def samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
        return [(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples
                if not s.name.endswith("_created")]

    assert samples(many) == samples(one)
    assert ("h_bucket", {"le": "0.05"}, 2.0) in samples(many)   # 0.0 and 0.05, on the bound
