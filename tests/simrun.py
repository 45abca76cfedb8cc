"""Helpers to run whole sweeps on the simulated cluster inside a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sweepd.app import foreground
from sweepd.config import Config, load_config
from sweepd.store.store import Store

NODES = "chi[2832,2863,2867-2868,2870,2872,2880-2881]"


def write_scenario(tmp_path: Path, faults: list[dict[str, Any]] | None = None,
                   time_scale: float = 0.002, **extra: Any) -> Path:
    scenario = {
        "cluster": {"nodes": NODES, "gpu": "MI300X", "gpu_memory_gib": 192,
                    "time_scale": time_scale, "noise": 0.003, "seed": 3},
        "models": {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400}},
        "faults": faults or [],
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def sim_config(tmp_path: Path, scenario: Path, **policy: Any) -> Config:
    overrides: dict[str, Any] = {"daemon.state_dir": str(tmp_path / "state"),
                                 "daemon.tick_s": 0.1,
                                 "cluster.sim": {"scenario": str(scenario)}}
    overrides.update({f"policy.{k}": v for k, v in policy.items()})
    return load_config(None, overrides)


def perf_spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "model-perf", "model": "llama2-70b", "nodes": NODES, **extra}


async def run(config: Config, spec: dict[str, Any]) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = await foreground.run_sweep(config, spec, lines.append)
    return code, lines


async def open_store(config: Config) -> Store:
    return await Store.open(config.daemon.db_path)


async def recorded(config: Config, sweep: int = 1
                   ) -> tuple[dict[str, Any] | None, list[str], list[tuple[str, str | None]]]:
    """A finished sweep as stored: its verdict, the rules of its events, and each run's
    label and outcome."""
    store = await open_store(config)
    try:
        verdict = (await store.sweeps.get(sweep)).verdict
        rules = [e.rule or "" for e in await store.events.of_sweep(sweep)]
        runs = [(r.label, r.outcome) for r in await store.runs.of_sweep(sweep)]
    finally:
        await store.close()
    return verdict, rules, runs
