"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweepd.core.states import RunState, SweepState
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.support.service import Daemon
from tests.support.xla import IMAGE_LINE, NODE, SPEC, end_recorded

# --- from test_xla_tuning_report_cli ---

FAST = "--xla_gpu_enable_pipelined_all_gather=true"


# Each profile's settings as its runs carry them; restore_default puts back what the env
# file sets (ENV_FILE) to the image's defaults.
SETTINGS: dict[str, tuple[list[str], dict[str, str]]] = {
    "fast": ([FAST], {}), "slow": ([], {"NCCL_NCHANNELS_PER_NET_PEER": "8"}),
    "restore_default": (["--xla_gpu_foo=0"], {"NCCL_IB_TIMEOUT": "18"})}


class Recorder:
    """Records one xla-tuning sweep's runs and jobs the way the engine leaves them."""

    def __init__(self, store: Store, sweep_id: int, logs: Path) -> None:
        self.store, self.sweep_id, self.logs = store, sweep_id, logs

    async def add(self, profile: str, tgs: float | None, klass: str | None = None,
                  detail: str | None = None, steps: bool = True) -> None:
        flags, env = SETTINGS.get(profile, ([], {}))
        params = RunParams(profile=profile, tag="default", labels={"wave": "2"},
                           xla_flags=flags, env=env)
        label = f"{profile}-{len(await self.store.runs.of_sweep(self.sweep_id))}"
        run = await self.store.runs.add(self.sweep_id, label, params, NODE, "test", "test")
        await self.store.runs.transition(run.id, RunState.ACTIVE, "started")
        job = await self.store.jobs.create(run, f"t{run.id}", f"xla-{label}", NODE)
        backend = str(7000 + job.id)
        log = self.logs / f"{backend}.log"
        lines = [f"{IMAGE_LINE} {' '.join(flags)}", *(f"export {k}={v}" for k, v in env.items())]
        if tgs is not None and steps:
            lines += [f"completed step: {s}, seconds: {2.0 + s / 100:.3f}, "
                      f"Tokens/s/device: {tgs:.3f}, loss: {8.5 - s / 15:.3f}" for s in range(15)]
        log.write_text("\n".join(lines) + "\n")
        await end_recorded(self.store, run.id, job.id, backend, log, tgs, klass, detail)


async def recorded(store: Store, tmp_path: Path, tgs: dict[str, list[float]],
                   recipe: str | None = "fast", verdict_extra: dict[str, Any] | None = None,
                   **spec: Any) -> int:
    """A finished sweep with these measured TGS per profile and an unknown-flag profile."""
    data = {**SPEC, **spec}
    sweep_id = await store.sweeps.create("xla-tuning", "t", data)
    rec = Recorder(store, sweep_id, tmp_path)
    for profile, values in tgs.items():
        for value in values:
            await rec.add(profile, value)
    await rec.add("typo", None, klass="unknown_flag", detail="xla_gpu_typo")
    await store.sweeps.transition(sweep_id, SweepState.RUNNING, "started")
    verdict = {"recipe": recipe, "gain": 0.08, "reason": "stop rule", "rule": "stop.winner",
               **(verdict_extra or {})}
    await store.sweeps.transition(sweep_id, SweepState.DONE, "verdict", verdict=verdict)
    return sweep_id


FSDP = {"baseline": [1000.0, 1004.0], "evidence": [990.0], "fast": [1080.0, 1086.0],
        "slow": [980.0]}


def use_checkout(daemon: Daemon, repo: Path) -> None:
    """The daemon's config: submit.sh mode with this checkout."""
    engine = daemon.service.engine
    engine.config = engine.config.model_copy(update={"cluster": engine.config.cluster.model_copy(
        update={"backend": "slurm", "slurm": engine.config.cluster.slurm.model_copy(
            update={"mode": "submit_sh", "repo": repo})})})

