"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sweepd.config import Config
from sweepd.store.rows import Event, Job, Run, Sweep
from tests.simrun import NODES, open_store, run, sim_config

# --- from test_xla_tuning_sweep_sim ---

MODEL = "deepseek3-671b"


FAST = "xla_gpu_enable_pipelined_all_gather"


def landscape(**changes: Any) -> dict[str, Any]:
    """A one-tag FSDP=8 cell: 1000 TGS at the image's defaults, nothing else moves it."""
    return {"parallelism": "FSDP=8", "tags": ["default"], "base_tgs": {"default": 1000.0},
            "noise": 0.003, **changes}


def write_tuning_scenario(tmp_path: Path, land: dict[str, Any],
                          time_scale: float = 0.0005) -> Path:
    scenario = {
        "cluster": {"nodes": NODES, "gpu": "MI355X", "gpu_memory_gib": 288,
                    "time_scale": time_scale, "noise": 0.003, "seed": 5},
        "tuning": {"model": MODEL, "landscapes": [land], "per_device_batch_size": 7,
                   "tags": {"default": {}}},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def spec(profiles: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"kind": "xla-tuning", "model": MODEL, "nodes": NODES, "parallelism": "FSDP=8",
            "per_device_batch_size": 7, "catalog": "replace", "profiles": profiles, **extra}


def env_profile(i: int) -> dict[str, Any]:
    """A profile the landscape does not know: it changes nothing (a neutral NCCL knob)."""
    return {"name": f"n{i:02d}", "settings": {f"NCCL_KNOB_{i:02d}": "1"}}


class Swept:
    def __init__(self, sweep: Sweep, runs: list[Run], jobs: list[Job], events: list[Event]):
        self.sweep, self.runs, self.jobs, self.events = sweep, runs, jobs, events

    def jobs_of(self, profile: str) -> list[Job]:
        ids = {r.id for r in self.runs if r.params.profile == profile}
        return [j for j in self.jobs if j.run_id in ids]

    def progress(self) -> list[str]:
        return [e.reason for e in self.events if e.kind == "progress"]


async def sweep_on_sim(tmp_path: Path, land: dict[str, Any], the_spec: dict[str, Any],
                       time_scale: float = 0.0005) -> tuple[int, Swept, Config]:
    config = sim_config(tmp_path, write_tuning_scenario(tmp_path, land, time_scale))
    code, _ = await run(config, the_spec)
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs, jobs = await store.runs.of_sweep(sweep.id), await store.jobs.of_sweep(sweep.id)
        swept = Swept(sweep, runs, jobs, await store.events.of_sweep(sweep.id))
    finally:
        await store.close()
    return code, swept, config

