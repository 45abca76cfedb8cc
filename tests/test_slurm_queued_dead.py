"""A job queued on pinned nodes when one of them is drained, on the real local Slurm.

Another job (not sweepd's) holds chi2881, so the sweep's job waits (`Resources`: busy, never
acted on); then chi2881 is drained and Slurm says `ReqNodeNotAvail, UnavailableNodes:chi2881`.
Without the queued check the job would wait for it forever.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.config import Config
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_cluster import cluster_env
from tests.slurm_sweep import direct_config
from tests.support.slurm import SPEC as XLA_SPEC
from tests.support.slurm import scenario as xla_scenario

pytestmark = pytest.mark.slurm

NODES = "chi[2880-2881]"
DEAD = "chi2881"


def _slurm(*argv: str, check: bool = True) -> str:
    done = subprocess.run(list(argv), env={**os.environ, **cluster_env()}, check=check,
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def _queued_job(db: Path) -> str | None:
    """The backend id of the sweep's job while it is queued."""
    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT backend_id FROM jobs WHERE state = 'queued' AND "
                           "backend_id IS NOT NULL").fetchone()
        return str(row[0]) if row else None
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def _reason(job: str) -> str:
    return _slurm("squeue", "--noheader", "-j", job, "-O", "Reason:", check=False)


async def _wait(what: str, probe: Any, sweep: asyncio.Task[Any]) -> Any:
    deadline = time.monotonic() + 60
    while not (found := await asyncio.to_thread(probe)):
        assert not sweep.done(), sweep.result()
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)
    return found


async def _drain_while_queued(config: Config, spec: dict[str, Any]) -> tuple[int, list[str]]:
    """Run the sweep with chi2881 busy; once its job waits for it (busy), drain chi2881."""
    blocker = _slurm("sbatch", "--parsable", "-w", DEAD, "-o", "/dev/null",
                     "--wrap", "sleep 300")
    sweep = asyncio.create_task(run(config, spec))
    try:
        job = await _wait("the sweep's job was never queued",
                          lambda: _queued_job(config.daemon.db_path), sweep)
        await _wait("the job never waited for the busy node",
                    lambda: _reason(job) == "Resources", sweep)
        await asyncio.sleep(2)   # several polls: a busy node is no reason to act
        assert _queued_job(config.daemon.db_path) == job
        assert not await _exclusions(config)
        _slurm("scontrol", "update", f"NodeName={DEAD}", "State=DRAIN", "Reason=sweepd-test")
        return await asyncio.wait_for(sweep, 60)
    finally:
        sweep.cancel()
        _slurm("scancel", blocker, check=False)
        await asyncio.sleep(1)
        _slurm("scontrol", "update", f"NodeName={DEAD}", "State=RESUME", check=False)


async def _exclusions(config: Config) -> list[str]:
    if not config.daemon.db_path.exists():
        return []
    store = await open_store(config)
    try:
        return [e.node for e in await store.exclusions.of_sweep(1)]
    finally:
        await store.close()


async def _decisions(config: Config) -> dict[str, str]:
    """Rule -> evidence of the sweep's decisions and transitions."""
    store = await open_store(config)
    try:
        return {e.rule: e.evidence or "" for e in await store.events.of_sweep(1) if e.rule}
    finally:
        await store.close()


@pytest.mark.timeout(300)
async def test_model_perf_excludes_the_drained_node_and_completes(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    code, lines = await _drain_while_queued(
        config, perf_spec(nodes=NODES, values=[4], min_nodes=1))
    assert code == EXIT_VERDICT, lines
    assert await _exclusions(config) == [DEAD]
    evidence = (await _decisions(config))["queued.exclude_node"]
    assert f"sinfo: {DEAD} drng" in evidence and "ReqNodeNotAvail" in evidence, evidence
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
    finally:
        await store.close()
    assert [j.state for j in jobs] == ["cancelled", "done"]
    assert jobs[1].nodes == "chi2880"


@pytest.mark.timeout(300)
async def test_frozen_nodelist_stops_and_keeps_its_nodes(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = direct_config(tmp_path, xla_scenario(tmp_path))
    code, lines = await _drain_while_queued(config, {**XLA_SPEC, "nodes": NODES})
    assert code == EXIT_AWAITING_DECISION, lines
    message = "\n".join(lines)
    assert f"{DEAD} (drng)" in message and "ReqNodeNotAvail" in message, message
    evidence = (await _decisions(config))["node.unusable"]
    assert f"sinfo: {DEAD} drng" in evidence and "ReqNodeNotAvail" in evidence, evidence
    assert not await _exclusions(config)
