"""Shared test helpers (moved here from the test files that defined them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepd.core.follow import LogFollower
from sweepd.core.kind_facts import job_ended
from sweepd.core.states import JobState, RunState
from sweepd.kinds.api import NewRun, SweepContext
from sweepd.kinds.xla_tuning.catalog.catalog import Setting
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, IMAGE_DEFAULTS, OVERLAP_LIMIT
from sweepd.kinds.xla_tuning.catalog.tpu_flags import VMEM_LIMIT
from sweepd.kinds.xla_tuning.deploy.sourced import source
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Result
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.search import Planned, Verdict, plan
from sweepd.kinds.xla_tuning.sim.hlo import FILE_NAME
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from sweepd.util.clock import Clock
from sweepd.util.hostlists import expand_nodes
from tests.support.xla_verdicts import EV, _inputs

# --- from test_xla_tuning_kind ---

NODE = "n[01-08]"


SPEC: dict[str, Any] = {
    "kind": "xla-tuning", "model": "llama2-70b", "nodes": NODE, "parallelism": "FSDP=8",
    "catalog": "replace",
    "profiles": [{"name": "fast", "settings": {"xla_gpu_enable_pipelined_all_gather": "true"},
                  "mechanism": "cross-iteration overlap"},
                 {"name": "slow", "settings": {"NCCL_NCHANNELS_PER_NET_PEER": "8"}}],
}


IMAGE_LINE = "XLA_FLAGS=" + " ".join(f"--{k}={v}" for k, v in IMAGE_DEFAULTS.items()
                                     if k.startswith("xla_"))


def spec_of(**changes: Any) -> XlaTuningSpec:
    return XlaTuningSpec.model_validate({**SPEC, **changes})


class Recorder:
    """Records runs and their jobs the way the engine leaves them, each job with a log."""

    def __init__(self, store: Store, sweep_id: int, logs: Path) -> None:
        self.store, self.sweep_id, self.logs = store, sweep_id, logs
        self.next_backend = 5000

    async def add(self, new: NewRun | tuple[str, RunParams], tgs: float | None = None,
                  klass: str | None = None, detail: str | None = None,
                  xla_line: str | None = None, loss: float = 7.5, finish: bool = True,
                  printed_env: Mapping[str, str] | None = None, extra: Sequence[str] = (),
                  dump: str | None = None, dump_to: Path | None = None) -> int:
        """`printed_env`: the env the log lists (default: the profile's); `extra`: lines
        the log ends with; `dump`: the HLO text the job writes, where the toolkit puts it
        (or in `dump_to`), while it runs."""
        label, params = (new.label, new.params) if isinstance(new, NewRun) else new
        while label in {r.label for r in await self.store.runs.of_sweep(self.sweep_id)}:
            label += "'"
        run = await self.store.runs.add(self.sweep_id, label, params, NODE, "test", "test")
        if not finish:
            return run.id
        await self.store.runs.transition(run.id, RunState.ACTIVE, "started")
        job = await self.store.jobs.create(run, f"t{run.id}", f"xla-{label}", NODE)
        self.next_backend += 1
        log = self.logs / f"{self.next_backend}.log"
        flags = " ".join(params.xla_flags)
        lines = [xla_line or f"{IMAGE_LINE} {flags}"]
        env = params.env if printed_env is None else printed_env
        lines += [f"export {k}={v}" for k, v in env.items()]
        if tgs is not None:
            lines += [f"completed step: {s}, seconds: {2.0 + s / 100:.3f}, "
                      f"Tokens/s/device: {tgs:.3f}, loss: {loss + 1 - s / 15:.3f}"
                      for s in range(15)]
        log.write_text("\n".join([*lines, *extra]) + "\n")
        if dump is not None:
            where = dump_to or self.logs / f"{self.next_backend}-{job.job_name}" / "xla_dump"
            where.mkdir(parents=True, exist_ok=True)
            (where / FILE_NAME).write_text(dump)
        await end_recorded(self.store, run.id, job.id, str(self.next_backend), log, tgs,
                           klass, detail)
        return run.id

    async def context(self, nodes: tuple[str, ...] | None = None,
                      facts: XlaFacts | None = None) -> SweepContext[XlaFacts]:
        """`nodes`: the pinned ones minus exclusions, as the engine passes them."""
        pinned = expand_nodes((await self.store.sweeps.get(self.sweep_id)).spec["nodes"])
        return SweepContext(runs=await self.store.runs.of_sweep(self.sweep_id),
                            nodes=pinned if nodes is None else nodes,
                            gpu_memory_gib=192.0, facts=facts or XlaFacts(),
                            jobs=await self.store.jobs.of_sweep(self.sweep_id))


async def end_recorded(store: Store, run_id: int, job_id: int, backend_id: str, log: Path,
                       tgs: float | None, klass: str | None, detail: str | None) -> None:
    """A recorded job's life to its end (queued at 1000 s, ended at 1600 s), and its run's,
    as the engine leaves it: its log read by the log pass (steps and the kind's facts
    stored with the offset), its end's facts stored before it is judged."""
    await store.jobs.transition(job_id, JobState.QUEUED, "queued", backend_id=backend_id,
                                    log_path=str(log), submitted_at=1000.0)
    await store.jobs.transition(job_id, JobState.RUNNING, "running")
    await follow_to_the_end(store, job_id)
    sweep = await store.sweeps.get((await store.jobs.get(job_id)).sweep_id)
    await job_ended(store, sweep.kind, await store.jobs.get(job_id))
    ok = klass is None
    await store.jobs.transition(job_id, JobState.DONE if ok else JobState.FAILED, "end",
                                    ended_at=1600.0, tgs=tgs, failure_class=klass,
                                    failure_detail=detail)
    await store.runs.transition(run_id, RunState.PASSED if ok else RunState.FAILED, "end",
                                    outcome="pass" if ok else "fail", tgs=tgs, failure_class=klass)


async def follow_to_the_end(store: Store, job_id: int) -> None:
    """The engine's log pass over one job's log, read to its end and stored."""
    follower = LogFollower(store, Clock(), missing_grace_s=1e9)
    try:
        while True:
            chunks = await follower.read_chunks([await store.jobs.get(job_id)])
            await store.jobs.record_logs([c for c in chunks if c is not None])
            if not follower.behind(job_id):
                return
    finally:
        await follower.retain(set())


async def recorder(store: Store, tmp_path: Path, spec: XlaTuningSpec) -> Recorder:
    sweep_id = await store.sweeps.create("xla-tuning", "t", spec.model_dump(mode="json"))
    return Recorder(store, sweep_id, tmp_path)


def params(profile: str, tag: str = "default", wave: str = "2", **more: Any) -> RunParams:
    return RunParams.model_validate({"profile": profile, "labels": {"wave": wave}, "tag": tag,
                                     **more})



# --- from test_xla_deploy ---

MODEL = "llama2-70b"


IMAGE = f"--{AG}={8 * GIB}"


PASS = {"FSDP=8": ["dcn_fsdp_parallelism=8"], "PP=8": ["dcn_pipeline_parallelism=8"],
        "TP=8": ["ici_tensor_parallelism=8"], "PP=4,FSDP=2": ["dcn_fsdp_parallelism=2",
                                                             "dcn_pipeline_parallelism=4"]}


# The toolkit's env-file shapes (its deepseek3-671b and llama3.1 files, and what people add).
DEEPSEEK = ("# Per-model environment overrides (sourced after train_env.sh).\n\n"
            f'XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}--{AG}={GIB}"\nexport XLA_FLAGS\n')


OVL2 = Setting(OVERLAP_LIMIT, "2")


RESTORE_AG = Setting(AG, IMAGE_DEFAULTS[AG])


def checkout(tmp_path: Path, env_text: str | None, yml: str = "") -> Path:
    configs = tmp_path / "repo" / "configs"
    configs.mkdir(parents=True)
    (configs / f"{MODEL}.gpu.yml").write_text(yml)
    env = configs / f"{MODEL}.env.sh"
    if env_text is not None:
        env.write_text(env_text)
    return env


def in_effect(env: Path, par: str) -> dict[str, str]:
    """Every setting a job of this parallelism runs with after the env file (last wins)."""
    got = source(env, PASS.get(par, []), IMAGE)
    return {s.key: s.value for s in got.settings()}



# --- from test_xla_tuning_tpu ---

def tpu_spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "xla-tuning", "platform": "tpu", "model": "llama2-70b", "node_count": 1,
            "parallelism": "FSDP=1", "per_device_batch_size": 8, "catalog": "replace",
            "profiles": [{"name": "vmem96k",
                          "settings": {VMEM_LIMIT: "98304"}, "mechanism": "MEMORY"},
                         {"name": "vmem32k",
                          "settings": {VMEM_LIMIT: "32768"}, "mechanism": "MEMORY"}],
            **extra}



# --- from test_xla_tuning_few_runs ---

FLAT = (("rs768M", 1000.0), ("agrs768M", 998.0), ("dbuf", 1001.0), ("pag", 999.0),
        ("prs", 1000.0), ("par", 1000.0))



# --- from test_xla_tuning_closing_stack ---

FILLER = ("nbuf", "nch8", "qps8", "ovl4", "lhs", "ag768M", "mem95", "rs512M", "ag512M",
          "ag1G", "nch8+rs768M", "ovl4+rs768M", "rs1G")



# --- from test_xla_tuning_family_edge ---

def planned_names(results: list[Result]) -> list[tuple[str, str]]:
    """The next wave on the facts file's FSDP=8 cell: (profile, rule) of each run planned."""
    out = plan(_inputs(fsdp8(), drift=DriftRead.MEAN), results, EV)
    assert not isinstance(out, Verdict) and out, out
    return [(p.profile.name, p.rule) for p in out if isinstance(p, Planned)]

