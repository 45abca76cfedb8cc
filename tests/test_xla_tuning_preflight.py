"""xla-tuning's pre-flight (issue 14): the Inventory read from the checkout's env file, the
cluster slot resolved to idle nodes at submission, the checks recorded, the 8 h timebox
inside a wave. Real store, the simulated cluster, the fixture toolkit checkout."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.daemon import open_parts
from sweepd.app.foreground import EXIT_VERDICT
from sweepd.app.service import Service
from sweepd.clusters import train_env
from sweepd.clusters.base import JobRequest
from sweepd.clusters.factory import make_backend
from sweepd.config import load_config
from sweepd.core.engine import Engine
from sweepd.core.states import JobState
from sweepd.kinds.api import SweepContext
from sweepd.kinds.registry import GatherContext, gather_context
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning import plan as adapter
from sweepd.kinds.xla_tuning import search
from sweepd.kinds.xla_tuning.catalog.flags import IMAGE_DEFAULTS
from sweepd.kinds.xla_tuning.evidence.results import Outcome, Result
from sweepd.kinds.xla_tuning.inventory import planner_facts
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.runs import gather, preflight
from sweepd.kinds.xla_tuning.sim.tuning import TUNING_SCENARIO
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.simrun import NODES as SIM_NODES
from tests.simrun import sim_config, write_scenario
from tests.slurm_cluster import cluster_env
from tests.slurm_sweep import direct_config, submit_sh_config
from tests.support import xla_sim as sim_sweep

FIXTURE = Path(__file__).parent / "fixtures" / "maxtext"
MODEL = "deepseek3-671b"
NODES = "n[01-08]"
AG = "xla_gpu_all_gather_combine_threshold_bytes"
MEM = "XLA_PYTHON_CLIENT_MEM_FRACTION"
# The reasons, refusals and recorded checks a person reads, one golden file a test.
GOLDEN_DIR = GOLDEN / "xla_preflight"


def _checks(events: dict[str, Any]) -> dict[str, str]:
    """Each recorded pre-flight check's reason over its evidence, by rule id."""
    checks = {rule: e for rule, e in events.items() if (rule or "").startswith("preflight.")}
    return {rule: f"{e.reason}\n{e.evidence or ''}" for rule, e in sorted(checks.items())}


def spec_of(**changes: Any) -> XlaTuningSpec:
    data = {"kind": "xla-tuning", "model": MODEL, "nodes": NODES, "parallelism": "FSDP=8",
            **changes}
    return XlaTuningSpec.model_validate(data)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "state.db")
    yield s
    await s.close()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "toolkit"
    shutil.copytree(FIXTURE, repo)
    return repo


def context(facts: XlaFacts) -> SweepContext[XlaFacts]:
    return SweepContext(runs=[], nodes=expand_nodes(NODES), gpu_memory_gib=192.0, facts=facts)


# --- 1. the Inventory ------------------------------------------------------------------------

async def test_the_inventory_is_read_from_the_checkouts_env_file(store: Store,
                                                                 checkout: Path) -> None:
    """The toolkit's form (`XLA_FLAGS="..."` then `export XLA_FLAGS`, a trailing comment on
    an export): `adapter.inventory` read neither (no flag, `.97  # more HBM...`)."""
    facts = await planner_facts.facts(store, spec_of(), GatherContext(checkout))
    assert [s.label for s in facts.deployed] == [f"{AG}=1073741824", f"{MEM}=.97"]
    assert facts.env_file == str(checkout / "configs" / f"{MODEL}.env.sh")
    # No checkout (sim, direct mode): nothing read, and the line says so.
    none = await planner_facts.facts(store, spec_of(), GatherContext(None))
    assert none.deployed == () and "no env file read" in none.inventory_line()
    # A model without an env file runs as the image has it: nothing to restore.
    (checkout / "configs" / f"{MODEL}.env.sh").unlink()
    absent = await planner_facts.facts(store, spec_of(), GatherContext(checkout))
    assert absent.deployed == () and "(absent)" in (absent.env_file or "")


async def test_wave1_restores_the_inventory_to_the_image_defaults_and_records_it(
        store: Store, checkout: Path) -> None:
    facts = await planner_facts.facts(store, spec_of(), GatherContext(checkout))
    planned = adapter.plan(spec_of(), context(facts))
    assert isinstance(planned, list)
    by_label = {n.label: n for n in planned}
    restore = by_label["restore_default"]
    assert restore.rule == "wave1.restore_default"
    # The env var is re-set (its `_env_` passthrough wins over the env file). The XLA flag
    # the env file sets cannot be changed from train_env.sh, which the toolkit sources
    # before the env file: no profile touches it (its submission would be refused), and
    # the baseline's reason says so.
    assert restore.params.xla_flags == []
    assert restore.params.env == {MEM: IMAGE_DEFAULTS[MEM]}
    assert not [n for n in planned if any(AG in f for f in n.params.xla_flags)]
    # The Inventory is recorded with the baseline's decision (its reason), and the verdict.
    check_golden_cases(GOLDEN_DIR / "wave1_restore.txt", {
        "baseline's reason": scrubbed(by_label["baseline"].reason, checkout=checkout)})
    # Where the arms win (direct mode, the simulator: no env file sourced after them), the
    # image's value is appended last and wins again.
    free = replace(facts, sourced_last=False)
    restore = {n.label: n for n in adapter.plan(spec_of(), context(free))  # type: ignore[union-attr]
               }["restore_default"]
    assert restore.params.xla_flags == [f"--{AG}={IMAGE_DEFAULTS[AG]}"]


def test_the_daemon_gives_gather_the_checkout_in_submit_sh_mode_only(tmp_path: Path) -> None:
    sh = load_config(None, {"cluster.backend": "slurm", "cluster.slurm": {
        "mode": "submit_sh", "repo": str(tmp_path)}})
    assert gather_context(sh).repo == tmp_path
    direct = load_config(None, {"cluster.backend": "slurm",
                                "cluster.slurm": {"repo": str(tmp_path),
                                                  "train_command": ["true"]}})
    assert gather_context(direct).repo is None


# --- 2. the cluster slot ---------------------------------------------------------------------

@contextlib.asynccontextmanager
async def sim_service(tmp_path: Path, time_scale: float = 1.0
                      ) -> AsyncIterator[tuple[Service, Store]]:
    """A real store, engine (never stepped) and service on the simulated cluster."""
    config = sim_config(tmp_path, write_scenario(tmp_path, time_scale=time_scale))
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    backend, clock = make_backend(config)
    try:
        yield Service(Engine(store, backend, clock, config)), store
    finally:
        await backend.close()
        await store.close()


def slot_spec(count: int, **more: Any) -> dict[str, Any]:
    return {"kind": "xla-tuning", "model": MODEL, "node_count": count,
            "parallelism": f"FSDP={count}", **more}


async def test_a_node_count_is_frozen_to_idle_nodes_at_submission(tmp_path: Path) -> None:
    async with sim_service(tmp_path) as (service, store):
        # Another job holds the first two nodes (long: time_scale 1): they are not idle.
        held = expand_nodes(SIM_NODES)[:2]
        busy = await service.engine.backend.submit(JobRequest(
            "other", "llama2-70b", held, tmp_path / "logs"))
        try:
            with pytest.raises(SpecError) as refused:
                await service.submit(slot_spec(8))
            check_golden_cases(GOLDEN_DIR / "slot_on_sim.txt", {
                "refused: too few idle nodes": str(refused.value)})
            assert await store.sweeps.all() == []   # nothing recorded
            shown = await service.validate(slot_spec(4))
            assert shown["nodes"] == "chi[2867-2868,2870,2872]"
            sweep = await service.submit(slot_spec(4))
        finally:
            await service.engine.backend.cancel(busy.backend_id)
        stored = await store.sweeps.get(sweep["id"])
        # The first four idle nodes by name, frozen into the stored spec.
        assert stored.spec["nodes"] == "chi[2867-2868,2870,2872]"
        assert stored.spec["node_count"] == 4
        chosen = [e for e in await store.events.of_sweep(sweep["id"]) if e.rule == "slot.resolved"]
        assert len(chosen) == 1 and chosen[0].kind == "decision"
        assert "the first 4 of 6 idle node(s)" in chosen[0].reason
        assert "simulated cluster" in (chosen[0].evidence or "")
        # The planner now sees named nodes: no `preflight.slot_unresolved` stop.
        spec = XlaTuningSpec.from_stored(stored.spec)
        assert isinstance(spec, XlaTuningSpec)
        planned = adapter.plan(spec, SweepContext(runs=[], nodes=spec.node_list,
                                                  gpu_memory_gib=192.0, facts=XlaFacts()))
        assert isinstance(planned, list) and planned


def _hold(nodes: str) -> str:
    """A job of ours on `nodes` (sleep): they are allocated, not idle, while it runs."""
    out = subprocess.run(["sbatch", "--parsable", "-N", str(len(expand_nodes(nodes))),
                          "-w", nodes, "-o", "/dev/null", "--wrap", "sleep 300"],
                         env={**os.environ, **cluster_env()}, check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.strip().split(";")[0]


async def _all_idle(count: int = 8) -> None:
    """Until the cluster's nodes are all idle: an earlier test's jobs on this cluster may
    still be completing, and this test counts idle nodes."""
    for _ in range(300):
        out = subprocess.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"],
                             capture_output=True, env={**os.environ, **cluster_env()},
                             text=True, timeout=30).stdout
        if len(set(out.split())) == count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the cluster's nodes never were all idle: {out!r}")


async def _running(job_id: str) -> None:
    for _ in range(300):
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                             env={**os.environ, **cluster_env()}, text=True, timeout=30).stdout
        if out.strip() == "RUNNING":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never ran")


@pytest.mark.slurm
async def test_real_slurm_freezes_the_slot_to_idle_nodes_of_the_partition(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    backend, clock = make_backend(config)
    service = Service(Engine(store, backend, clock, config))
    await _all_idle()
    held = _hold("chi[2832,2863]")
    try:
        await _running(held)
        with pytest.raises(SpecError, match=r"node_count 8: only 6 idle node\(s\) in "
                                            r"partition debug now \(chi\[2867-2868"):
            await service.submit(slot_spec(8, partition="debug"))
        # A partition the cluster does not have is refused first, naming those it has.
        with pytest.raises(SpecError, match=r"partition 'nosuch' does not exist on this "
                                            r"cluster; its partitions: debug \(default\)"):
            await service.submit(slot_spec(4, partition="nosuch"))
        assert await store.sweeps.all() == []
        sweep = await service.submit(slot_spec(4, partition="debug"))
        stored = await store.sweeps.get(sweep["id"])
        assert stored.spec["nodes"] == "chi[2867-2868,2870,2872]"
        chosen = [e for e in await store.events.of_sweep(sweep["id"]) if e.rule == "slot.resolved"]
        check_golden_cases(GOLDEN_DIR / "slot_on_slurm.txt", {
            "slot.resolved": f"{chosen[0].reason}\n{chosen[0].evidence}"})
    finally:
        subprocess.run(["scancel", held], env={**os.environ, **cluster_env()}, timeout=30,
                       check=False)
        await backend.close()
        await store.close()


# --- 3. the pre-flight checks ----------------------------------------------------------------

def test_a_tune_profile_block_left_in_train_env_sh_refuses(checkout: Path) -> None:
    path = checkout / "train_env.sh"
    clean = path.read_text()
    assert preflight.leftover(path).ok
    path.write_text(train_env.add_arm(clean, train_env.arm("ag1G", [f"--{AG}=1073741824"])))
    left = preflight.leftover(path)
    assert not left.ok and left.rule == "preflight.train_env"
    # A block sweepd did not write is refused too (nothing to describe: a person's).
    path.write_text(clean + 'case "${TUNE_PROFILE}" in\n  mine) export NCCL_X=1 ;;\nesac\n')
    foreign = preflight.leftover(path)
    assert not foreign.ok and foreign.rule == "preflight.train_env"
    check_golden_cases(GOLDEN_DIR / "train_env_leftover.txt", {
        "sweepd's arm left": scrubbed(left.text, checkout=checkout),
        "a block sweepd did not write": scrubbed(foreign.text, checkout=checkout)})


async def test_the_checks_are_recorded_at_submission_on_sim(tmp_path: Path) -> None:
    async with sim_service(tmp_path) as (service, store):
        shown = await service.validate(slot_spec(8))
        assert [c["rule"] for c in shown["preflight"]] == ["preflight.nodes",
                                                           "preflight.other_users"]
        sweep = await service.submit(slot_spec(8))
        events = {e.rule: e for e in await store.events.of_sweep(sweep["id"])
                  if (e.rule or "").startswith("preflight.")}
    assert events["preflight.nodes"].evidence == f"node states: idle: {SIM_NODES}"
    assert set(events) == {"preflight.nodes", "preflight.other_users"}   # no checkout
    check_golden_cases(GOLDEN_DIR / "checks_on_sim.txt", _checks(events))


@pytest.mark.slurm
async def test_submit_sh_mode_refuses_a_leftover_and_records_each_check(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = submit_sh_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    repo = config.cluster.slurm.repo
    assert repo is not None
    train = repo / "train_env.sh"
    clean = train.read_text()
    train.write_text(train_env.add_arm(clean, train_env.arm("ag1G", [f"--{AG}=1073741824"])))
    config.daemon.state_dir.mkdir(parents=True)
    store = await Store.open(config.daemon.db_path)
    backend, clock = make_backend(config)
    service = Service(Engine(store, backend, clock, config))
    data = {**slot_spec(8), "node_count": None, "nodes": SIM_NODES}
    try:
        with pytest.raises(SpecError, match=r"pre-flight: .*train_env.sh still holds sweepd's"):
            await service.submit(data)
        assert await store.sweeps.all() == []
        train.write_text(clean)
        # The checkout's env file reaches the first plan: Wave 1 restores its flags.
        shown = await service.validate(data)
        assert "restore_default" in [r["label"] for r in shown["first_plan"]["runs"]]
        sweep = await service.submit(data)
        events = {e.rule: e for e in await store.events.of_sweep(sweep["id"])}
    finally:
        await backend.close()
        await store.close()
    # squeue answered; the local cluster's jobs are all this user's.
    assert {"preflight.train_env", "preflight.nodes", "preflight.other_users"} <= set(events)
    # The nodes' states vary with the jobs an earlier test left completing: the reason only.
    said = {k: scrubbed(v, repo=repo, user=getpass.getuser()) for k, v in _checks(events).items()}
    said["preflight.nodes"] = events["preflight.nodes"].reason
    check_golden_cases(GOLDEN_DIR / "checks_on_slurm.txt", said)


# --- 4. the 8 h timebox inside a wave --------------------------------------------------------

def _done(profile: str, hours: float, wave: int = 1) -> Result:
    return Result(profile, "default", Outcome.OK, 1000.0, 28.0, queue_s=hours * 3600, wave=wave)


def test_a_wave_is_cut_to_the_runs_that_start_within_8_hours() -> None:
    inp = spec_of(config_tags={"default": {}}).inputs(())
    # Wave 1 took 6 h for 3 runs (2 h each): one more run starts before 8 h, no second.
    wave1 = [_done("baseline", 2.0), _done("evidence", 2.0), _done("baseline", 2.0)]
    step = search.plan(inp, wave1, None)
    assert isinstance(step, tuple) and len(step) == 1, step
    assert "wave cut to 1 of " in step[0].reason and "(stop.timebox)" in step[0].reason
    # 4 h spent at 1.33 h per run: of a whole wave, the 3 that start before 8 h.
    early = [_done("baseline", 4 / 3), _done("evidence", 4 / 3), _done("baseline", 4 / 3)]
    more = search.plan(inp, early, None)
    assert isinstance(more, tuple) and len(more) == 3, more
    # The cut run done (8 h): the sweep ends on the timebox with what it has.
    done = [*wave1, _done(step[0].profile.name, 2.0, wave=2)]
    verdict = search.plan(inp, done, None)
    assert isinstance(verdict, search.Verdict) and verdict.rule == "stop.timebox"


async def test_a_whole_sweep_on_sim_stops_submitting_at_8_hours(tmp_path: Path) -> None:
    # 15 steps of ~570 s: a job takes ~2.5 h of cluster time; a wave of 8 would take 20 h.
    land = sim_sweep.landscape(base_tgs={"default": 50.0}, step_s_at_base=573.0)
    profiles = [sim_sweep.env_profile(i) for i in range(20)]
    code, swept, _ = await sim_sweep.sweep_on_sim(tmp_path, land, sim_sweep.spec(profiles),
                                                  time_scale=0.0002)
    assert code == EXIT_VERDICT
    assert (swept.sweep.verdict or {})["rule"] == "stop.timebox"
    shares = gather.queue_time(swept.jobs)   # as the time rules read it
    total, longest = sum(shares.values()), max(shares.values())
    # Runs start only while the budget lasts: past 8 h by less than one run, and no run is
    # submitted only to be cancelled at the stop (before: 10 jobs, 7 of them cancelled).
    assert total < 8 * 3600 + longest
    assert [j.state for j in swept.jobs] == [JobState.DONE] * len(swept.jobs), swept.jobs
    assert len(swept.jobs) <= 4   # wave 1 (baseline, evidence) and the one run that fit
    assert any("wave cut to" in e.reason for e in swept.events)


async def test_on_sim_the_landscapes_deployed_settings_are_the_inventory(
        store: Store, tmp_path: Path) -> None:
    """No checkout on the simulator: its tuning landscape's `deployed` (what its jobs run
    as baseline-deployed) plays the env file; Wave 1 then restores it too."""
    pp8 = spec_of(parallelism="PP=8")
    config = load_config(None, {"daemon.state_dir": str(tmp_path / "state"),
                                "cluster.sim": {"scenario": str(TUNING_SCENARIO)}})
    where = gather_context(config)
    assert where == GatherContext(backend="sim", scenario=TUNING_SCENARIO,
                                  outputs=tmp_path / "state" / "outputs")
    facts = await planner_facts.facts(store, pp8, where)
    assert [s.label for s in facts.deployed] == [f"{AG}=1073741824"]
    check_golden_cases(GOLDEN_DIR / "inventory_on_sim.txt", {
        "PP=8": scrubbed(facts.inventory_line(), scenario=TUNING_SCENARIO)})
    planned = adapter.plan(pp8, context(facts))
    assert isinstance(planned, list)
    assert "restore_default" in [n.label for n in planned]
    # The FSDP=8 cell deploys nothing: no restore_default run (the demo's cell).
    assert (await planner_facts.facts(store, spec_of(), where)).deployed == ()


async def test_the_daemon_resolves_a_slot_through_its_timed_backend(tmp_path: Path) -> None:
    """The daemon wraps its backend to time each call (`TimedBackend`): the slot and the
    pre-flight ask it like any other call (they were refused as "cannot list" there)."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep = await parts.service.submit(slot_spec(4))
        stored = await parts.store.sweeps.get(sweep["id"])
        assert stored.spec["nodes"] == "chi[2832,2863,2867-2868]"
        rules = [e.rule for e in await parts.store.events.of_sweep(sweep["id"])]
        assert "slot.resolved" in rules and "preflight.other_users" in rules
