"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from sweepd.api.server import start_server
from sweepd.app.service import Service
from sweepd.cli.main import main
from sweepd.clusters.factory import make_backend
from sweepd.config import Config, load_config
from sweepd.core.engine import Engine
from sweepd.core.states import JobState, RunState
from sweepd.notify.bot import make_bot
from sweepd.notify.chat import ChatControl
from sweepd.store.outbox import Outbox
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.telegram_double import (
    CHAT,
    FAST,
    BotApiDouble,
    Sleeps,
    token,
)

# --- from test_api ---

# The simulated cluster's nodes: a spec naming others is refused at submit.
NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881]"


SPEC: dict[str, Any] = {"kind": "model-perf", "model": "llama2-70b", "nodes": NODES}


MAX_BODY = 64 * 1024


@dataclass
class Api:
    service: Service
    store: Store
    socket: Path
    http: aiohttp.ClientSession

    async def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        async with self.http.request(method, f"http://sweepd{path}", **kw) as r:
            ctype = r.headers.get("Content-Type", "")
            body = await r.json() if ctype.startswith("application/json") else await r.text()
            return r.status, body


@contextlib.asynccontextmanager
async def serve_service(tmp_path: Path) -> AsyncIterator[tuple[Service, Store, Path]]:
    """A real store, engine (sim backend, never stepped) and service, served on a socket."""
    config = load_config(None, {"daemon.state_dir": str(tmp_path)})
    store = await Store.open(tmp_path / "db.sqlite")
    backend, clock = make_backend(config)
    service = Service(Engine(store, backend, clock, config))
    sock = tmp_path / "sweepd.sock"
    runner = await start_server(service, sock, MAX_BODY)
    try:
        yield service, store, sock
    finally:
        await runner.cleanup()
        await backend.close()
        await store.close()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with serve_service(tmp_path) as (service, store, sock), \
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(sock))) as http:
        yield Api(service, store, sock, http)



# --- from test_cli_client ---

@dataclass
class Daemon:
    service: Service
    store: Store
    socket: Path
    capsys: pytest.CaptureFixture[str]

    async def run(self, *argv: str) -> tuple[int, str, str]:
        """`sweepd <argv> --socket <ours>`: exit code, stdout, stderr."""
        self.capsys.readouterr()
        code = await asyncio.to_thread(main, [*argv, "--socket", str(self.socket)])
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
async def daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> AsyncIterator[Daemon]:
    async with serve_service(tmp_path) as (service, store, sock):
        yield Daemon(service, store, sock, capsys)


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GOOD_YAML = f"kind: model-perf\nmodel: llama2-70b\nnodes: {NODES!r}\nname: first\n"



# --- from test_chat_control ---

async def poll(service: Service, double: BotApiDouble) -> int:
    """One getUpdates round by a fresh client (as after a restart)."""
    bot = make_bot(token(), double.base_url, FAST)
    chat = ChatControl(Outbox(service.store), bot, token(), [CHAT], service, poll_timeout_s=0,
                       timing=FAST, sleep=Sleeps())
    try:
        return await chat.poll_once()
    finally:
        await bot.shutdown()



# --- from test_init_check ---

def xdg_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
            "XDG_STATE_HOME": str(tmp_path / "st"), "XDG_RUNTIME_DIR": str(tmp_path / "rt")}


def sweepd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweepd", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)



# --- from test_metrics ---

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



# --- from test_demo ---

# What each kind's demo must find (model-perf's: the test above, in full).
DEMO_EXPECTS = {
    "model-perf": r"optimum per_device_batch_size=\d+",
    "node-perf": r"\| chi2868 \|.*DEGRADED",
    "network": r"Verdict: \*\*bad link between chi2867 and chi2881\*\*",
    "model-sweep": r"\*\*New breakage\*\* grok-1 8N at candidate",
    # The verdict against the scenario's ground truth (needs the simulator's flag-effect
    # trainer and RunParams' xla_flags: issue 14 items 4 and 5).
    "xla-tuning": r"(?m)^\| \S+ ⭐ .*\n(?s:.*)ground truth",   # tests/test_xla_tuning_demo.py
    # The whole chain against the simulator's joint truth: tests/test_campaign_demo.py.
    "campaign": r"\*\*Final: confirmed gain",
}



# --- from test_engine_scale ---

STEP = "0: completed step: {n}, seconds: 1.000, TFLOP/s/device: 400.0, Tokens/s/device: 1400.0"


async def _seed(store: Store, logs: Path, count: int, lines: int) -> list[Path]:
    """`count` running jobs of model-perf sweeps, each log holding `lines` step lines."""
    logs.mkdir(exist_ok=True)
    paths = []
    sweep = await store.sweeps.create("model-perf", "scale", {
        "kind": "model-perf", "model": "llama2-70b", "nodes": "bn[0000-0009]",
        "values": [1, 2]})
    for j in range(count):
        run = await store.runs.add(sweep, f"b={j}", RunParams(overrides={"b": j}), f"bn{j:04d}",
                                       "seeded")
        await store.runs.transition(run.id, RunState.ACTIVE, "seeded")
        job = await store.jobs.create(run, f"tok{j}", f"job-{j}", f"bn{j:04d}")
        path = logs / f"job-{j}.log"
        path.write_text("".join(STEP.format(n=n) + "\n" for n in range(lines)))
        await store.jobs.transition(job.id, JobState.QUEUED, "seeded", backend_id=str(j),
                                        log_path=str(path), submitted_at=time.time())
        await store.jobs.transition(job.id, JobState.RUNNING, "seeded",
                                        last_output_at=time.time())
        paths.append(path)
    return paths


def _config(tmp_path: Path) -> Config:
    return load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                              "daemon.socket": str(tmp_path / "sweepd.sock"),
                              "daemon.tick_s": 0.1})



# --- from test_sim_cluster ---

HANG = {"kind": "hang", "phase": "compile", "model": "llama2-70b", "batch": 3}


def scenario_file(tmp_path: Path, faults: list[dict[str, object]] | None = None) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"nodes": "chi[2832,2863,2867-2868]", "time_scale": 0.0005, "seed": 2},
        "models": {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400}},
        "faults": faults or [HANG],
    }))
    return path

