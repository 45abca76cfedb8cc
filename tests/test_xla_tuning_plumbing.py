"""The xla-tuning sweep's plumbing (issues 21 and 23): the seed's submission template (time
per job, the heartbeat timeout, no empty `profiler=`), the spec's partition reaching sbatch,
the other-users check behind an ssh prefix, the pre-flight again at a resume, and a toolkit
that never applies a profile noticed and named (real store, the toolkit stand-in's
`_train.sh` run for real to make the job logs)."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.daemon import open_parts
from sweepd.clusters import train_env as te
from sweepd.clusters.base import JobRequest, Listing, Submitted
from sweepd.clusters.slurm import SlurmCluster, sbatch_args
from sweepd.clusters.slurm.script import BatchScript, render_batch_script
from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import Stop, SweepContext
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import GatherContext, PreflightContext
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning import plan as adapter
from sweepd.kinds.xla_tuning.evidence import applied
from sweepd.kinds.xla_tuning.evidence.logread import effective
from sweepd.kinds.xla_tuning.evidence.results import Outcome
from sweepd.kinds.xla_tuning.inventory import inventory
from sweepd.kinds.xla_tuning.inventory.planner_facts import XlaFacts
from sweepd.kinds.xla_tuning.rules import SLOT_UNRESOLVED
from sweepd.kinds.xla_tuning.runs import gather, plan_checks, preflight
from sweepd.kinds.xla_tuning.sim.hlo import FILE_NAME
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import NODES, sim_config, write_scenario
from tests.slurm_cluster import MAXTEXT_FIXTURE
from tests.slurm_sweep import submit_sh_config
from tests.support.slurm import SPEC as SLURM_SPEC
from tests.support.slurm import Settings, make_cluster
from tests.support.slurm import scenario as slurm_scenario
from tests.support.xla import NODE, end_recorded, params, recorder, spec_of
from tests.support.xla_sim import env_profile, landscape, write_tuning_scenario

PAG = "xla_gpu_enable_pipelined_all_gather"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "state.db")
    yield s
    await s.close()


# --- the seed's submission template ----------------------------------------------------------

async def test_every_job_carries_the_heartbeat_timeout_and_the_templates_time_limit(
        store: Store, tmp_path: Path) -> None:
    """xla-tuning.SKILL.md: `--time=45:00` per job, `--time=50:00` for the evidence run, and
    `jax_distributed_heartbeat_timeout_seconds=99999` on every submission."""
    spec = spec_of()
    rec = await recorder(store, tmp_path, spec)
    planned = adapter.plan(spec, await rec.context())
    assert isinstance(planned, list) and planned
    times = {n.params.profile: n.params.time_limit for n in planned}
    assert times.pop("evidence") == "50:00"
    assert times and set(times.values()) == {"45:00"}
    for n in planned:
        assert n.params.overrides["jax_distributed_heartbeat_timeout_seconds"] == 99999
    # Stored and read back as the run's params (what the engine submits from).
    back = RunParams.model_validate_json(planned[0].params.to_json())
    assert back.time_limit == planned[0].params.time_limit


def test_an_empty_profiler_override_is_refused_at_validation_in_one_line() -> None:
    said: dict[str, str] = {}
    for name, where in [("overrides", {"overrides": {"profiler": ""}}),
                        ("a config tag", {"config_tags": {"default": {"profiler": " "}}}),
                        ("a profile", {"profiles": [{"name": "clean",
                                                     "settings": {"profiler": ""}}]})]:
        data = {"kind": "xla-tuning", "model": "llama2-70b", "nodes": NODE,
                "parallelism": "FSDP=8", **where}
        with pytest.raises(SpecError) as caught:
            parse_spec(data)
        said[name] = str(caught.value)
        assert "\n" not in said[name]
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "empty_profiler_refused.txt", said)


def test_an_empty_profiler_is_refused_for_every_kind_and_xplane_is_kept() -> None:
    with pytest.raises(SpecError, match="profiler: an empty value is refused"):
        parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": NODE,
                    "overrides": {"profiler": ""}})
    spec = parse_spec({"kind": "xla-tuning", "model": "llama2-70b", "nodes": NODE,
                       "parallelism": "FSDP=8", "overrides": {"profiler": "xplane"}})
    assert spec.profiler


# --- the partition, the time, the dump directory ----------------------------------------------

def test_sbatch_takes_the_requests_partition_and_time_before_the_configured_ones() -> None:
    cluster = SlurmCluster(Settings(partition="configured", time_limit="5"))
    request = JobRequest(token="t1", model="m", nodes=["chi1"], output_dir=Path("/o"),
                         partition="asked", time_limit="45:00")
    args = sbatch_args(cluster.settings, request)
    assert args[args.index("-p") + 1] == "asked" and args[args.index("-t") + 1] == "45:00"
    plain = sbatch_args(cluster.settings, JobRequest(token="t2", model="m", nodes=["chi1"],
                                                     output_dir=Path("/o")))
    assert plain[plain.index("-p") + 1] == "configured" and plain[plain.index("-t") + 1] == "5"


@pytest.mark.slurm
async def test_real_slurm_runs_the_job_in_the_asked_partition_with_its_time_limit(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """The configured partition does not exist: only the request's reaches sbatch."""
    cluster = make_cluster(slurm_env, partition="no-such-partition", time_limit="5")
    sub = await cluster.submit(JobRequest(
        token="part1", model="llama2-70b", nodes=["chi2872"], output_dir=tmp_path,
        overrides={"steps": "2"}, partition="debug", time_limit="45:00"))
    try:
        proc = await asyncio.create_subprocess_exec(
            "scontrol", "show", "job", sub.backend_id, env={**os.environ, **slurm_env},
            stdout=asyncio.subprocess.PIPE)
        out = (await proc.communicate())[0].decode()
        assert "Partition=debug" in out and "TimeLimit=00:45:00" in out, out
    finally:
        await cluster.cancel(sub.backend_id)


async def test_the_specs_partition_and_the_runs_time_reach_each_submission(
        tmp_path: Path) -> None:
    """Issue 14 left: the spec's `partition` chose the nodes but never reached sbatch."""
    scenario = write_tuning_scenario(tmp_path, landscape())
    config = sim_config(tmp_path, scenario)
    seen: list[JobRequest] = []
    async with open_parts(config) as parts:
        real_submit = parts.engine.backend.submit

        async def recording(request: JobRequest) -> Submitted:
            seen.append(request)
            return await real_submit(request)

        parts.engine.backend.submit = recording   # type: ignore[method-assign]
        spec = {"kind": "xla-tuning", "model": "deepseek3-671b", "partition": "gpu",
                "node_count": 8, "parallelism": "FSDP=8", "per_device_batch_size": 7,
                "catalog": "replace", "profiles": [env_profile(1)]}
        await parts.service.submit(spec)
        await parts.engine.step()
    assert seen, "wave 1 submitted nothing"
    assert {r.partition for r in seen} == {"gpu"}
    by_profile = {r.profile and r.profile.name: r.time_limit for r in seen}
    assert by_profile.get("baseline") == "45:00"
    assert by_profile.get("evidence") == "50:00"


def test_direct_mode_gives_the_job_its_own_output_path_beside_the_log() -> None:
    """The evidence run's dump goes to `${OUTPUT_PATH}/xla_dump`: unset, it landed relative
    to wherever sbatch ran, and the gather (which looks beside the log) never found it."""
    script = render_batch_script(BatchScript(
        job_name="JAX-m-x", model="m", passthrough=[], env={}, train_command=["t"],
        output_dir="/sweeps/sweep-3"))
    check_golden_cases(GOLDEN / "xla_plumbing" / "output_path_line.txt", {
        "direct mode": "\n".join(ln for ln in script.splitlines() if "OUTPUT_PATH" in ln)})
    own = render_batch_script(BatchScript(
        job_name="JAX-m-x", model="m", passthrough=[], env={"OUTPUT_PATH": "/mine"},
        train_command=["t"], output_dir="/sweeps/sweep-3"))
    assert "OUTPUT_PATH=/sweeps" not in own and "export OUTPUT_PATH=/mine" in own


# --- the other-users check behind an ssh prefix -----------------------------------------------

def fake_ssh(tmp_path: Path, remote_user: str) -> list[str]:
    """An `ssh` to a login node whose user is `remote_user`: it runs the remote command in
    a shell whose `squeue` lists three jobs and whose `id -un` names that user."""
    bin_dir = tmp_path / "remote-bin"
    bin_dir.mkdir()
    local = getpass.getuser()   # on the login node, this name is just another user
    (bin_dir / "squeue").write_text(
        f"#!/bin/bash\nprintf '%s\\n' '11|{local}|RUNNING|chi1' '12|bob|PENDING|' "
        f"'13|{remote_user}|RUNNING|chi2'\n")
    (bin_dir / "id").write_text(f"#!/bin/bash\necho {remote_user}\n")
    ssh = tmp_path / "ssh"
    ssh.write_text(f'#!/bin/bash\nshift\nPATH={bin_dir}:$PATH exec bash -c "$1"\n')
    for f in (*bin_dir.iterdir(), ssh):
        f.chmod(0o755)
    return [str(ssh), "login1"]


async def test_other_users_behind_ssh_are_told_from_the_remote_user(tmp_path: Path) -> None:
    """Behind `ssh login1`, Slurm sees the remote account: the check compared squeue's user
    column with the daemon's local user, so the sweep's own account's jobs counted as
    another user's (and a local namesake's were hidden)."""
    cluster = SlurmCluster(Settings(command_prefix=fake_ssh(tmp_path, "svc-tune")))
    found = await cluster.others_jobs("gpu")
    assert [j.split()[0] for j in found.items] == ["11", "12"]
    assert "users other than svc-tune" in found.evidence


# --- the pre-flight again at a resume -----------------------------------------------------------

async def test_a_resume_runs_the_preflight_again_and_records_it(
        tmp_path: Path) -> None:
    scenario = write_tuning_scenario(tmp_path, landscape())
    config = sim_config(tmp_path, scenario)
    async with open_parts(config) as parts:
        spec = {"kind": "xla-tuning", "model": "deepseek3-671b", "nodes": NODES,
                "parallelism": "FSDP=8", "per_device_batch_size": 7, "catalog": "replace",
                "profiles": [env_profile(1)]}
        sid = int((await parts.service.submit(spec))["id"])
        await parts.store.sweeps.transition(sid, SweepState.RUNNING, "started")
        await parts.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "stopped",
                                                  rule="test.stop", progress="[xla-tuning STOP] x")
        before = [e for e in await parts.store.events.of_sweep(sid) if e.rule == "preflight.nodes"]
        await parts.service.resume(sid)
        after = [e for e in await parts.store.events.of_sweep(sid) if e.rule == "preflight.nodes"]
        assert len(after) == len(before) + 1 and after[-1].reason.startswith("on resume: ")
        assert (await parts.store.sweeps.get(sid)).state == SweepState.RUNNING


@pytest.mark.slurm
async def test_on_real_slurm_a_block_left_meanwhile_refuses_the_resume(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    """submit.sh mode: while the sweep waited for a person, someone else's TUNE_PROFILE
    block appeared in train_env.sh; the resume's pre-flight refuses it, and the sweep stays
    stopped, nothing recorded."""
    config = submit_sh_config(tmp_path, slurm_scenario(tmp_path))
    repo = config.cluster.slurm.repo
    assert repo is not None
    async with open_parts(config) as parts:
        sid = int((await parts.service.submit(SLURM_SPEC))["id"])
        await parts.store.sweeps.transition(sid, SweepState.RUNNING, "started")
        await parts.store.sweeps.transition(sid, SweepState.AWAITING_DECISION, "stopped",
                                                  rule="test.stop", progress="[xla-tuning STOP] x")
        te.apply(repo / "train_env.sh", te.arm("theirs", (f"--{PAG}=false",)))
        events = len(await parts.store.events.of_sweep(sid))
        with pytest.raises(SpecError, match=r"(?s)pre-flight: .*theirs: .*then resume"):
            await parts.service.resume(sid)
        assert (await parts.store.sweeps.get(sid)).state == SweepState.AWAITING_DECISION
        assert len(await parts.store.events.of_sweep(sid)) == events
        te.clean(repo / "train_env.sh")
        await parts.service.resume(sid)
        assert (await parts.store.sweeps.get(sid)).state == SweepState.RUNNING
        resumed = [e for e in await parts.store.events.of_sweep(sid)
                   if e.rule == "preflight.train_env"]
        assert resumed[-1].reason.startswith("on resume: ")


def test_at_a_resume_the_sweeps_own_arms_pass_and_anothers_refuse(tmp_path: Path) -> None:
    path = tmp_path / "train_env.sh"
    shutil.copy(MAXTEXT_FIXTURE / "train_env.sh", path)
    te.apply(path, te.arm("pag", (f"--{PAG}=true",)))
    assert not preflight.leftover(path).ok                       # a new sweep: refused
    assert preflight.leftover(path, frozenset({"pag", "nch8"})).ok  # its own, at a resume
    te.apply(path, te.arm("other", (), {"NCCL_NCHANNELS_PER_NET_PEER": "8"}))
    refused = preflight.leftover(path, frozenset({"pag"}))
    assert not refused.ok and "other" in refused.text


async def test_the_preflight_context_tells_a_resume_from_a_submission(tmp_path: Path) -> None:
    """The train_env check sees the resumed sweep's profiles (its own arms)."""
    repo = tmp_path / "maxtext-slurm"
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    te.apply(repo / "train_env.sh", te.arm("pag", (f"--{PAG}=true",)))
    spec = XlaTuningSpec.model_validate({"kind": "xla-tuning", "model": "llama2-70b",
                                         "nodes": NODE, "parallelism": "FSDP=8"})

    class Quiet:
        async def node_states(self, nodes: list[str]) -> dict[str, str]:
            return dict.fromkeys(nodes, "idle")

        async def others_jobs(self, partition: str | None) -> Listing:
            return Listing([], "squeue")

    where = GatherContext(repo=repo, scenario=None)
    fresh = await preflight.checks(spec, PreflightContext(Quiet(), where, None))
    assert not fresh[-1].ok
    run = await _run_with_profile(tmp_path, "pag")
    again = await preflight.checks(spec, PreflightContext(Quiet(), where, None, [run]))
    assert again[-1].ok and "own arms" in again[-1].text


async def _run_with_profile(tmp_path: Path, profile: str) -> Any:
    s = await Store.open(tmp_path / "runs.db")
    try:
        sid = await s.sweeps.create("xla-tuning", "t", {})
        return await s.runs.add(sid, profile, params(profile), NODE, "t", "t")
    finally:
        await s.close()


# --- a toolkit that never applies a profile ---------------------------------------------------

def toolkit(tmp_path: Path, pre_exports: bool) -> Path:
    """The toolkit stand-in; `pre_exports=False`: a `_train.sh` that neither pre-exports the
    `_env_` passthrough nor fills EXTRACTED_ENV_MAP before it sources train_env.sh, so the
    arm `_env_TUNE_PROFILE` names never runs (the values are exported only afterwards)."""
    repo = tmp_path / ("toolkit" if pre_exports else "old-toolkit")
    shutil.copytree(MAXTEXT_FIXTURE, repo)
    if not pre_exports:
        train = repo / "_train.sh"
        text = train.read_text()
        cut = [line for line in text.splitlines()
               if 'reexport "Pre-exporting' in line or 'EXTRACTED_ENV_MAP["' in line]
        assert len(cut) == 2, cut
        for line in cut:
            text = text.replace(line + "\n", "" if "Pre-export" in line else "    :\n")
        train.write_text(text)
    for name, flags, env in (("pag", (f"--{PAG}=true",), {}),
                             ("nch8", (), {"NCCL_NCHANNELS_PER_NET_PEER": "8"}),
                             ("mem95", (), {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"}),
                             ("evidence", (), {"ENABLE_XLA_DUMP": "1"})):
        te.apply(repo / "train_env.sh", te.arm(name, flags, env))
    return repo


def job_log(repo: Path, path: Path, profile: str, tgs: float = 1000.0) -> None:
    """What the job prints: `_train.sh`'s environment (run for real), then 15 steps. The
    evidence run's switch also goes as `_env_` (train_env.sh reads it before the arms), and
    its trainer writes the dump where the flags it got say."""
    early = ["_env_ENABLE_XLA_DUMP=1"] if profile == "evidence" else []
    out = subprocess.run(["bash", str(repo / "_train.sh"), "--model", "llama2-70b", "--",
                          "steps=15", f"_env_TUNE_PROFILE={profile}", *early],
                         capture_output=True, text=True, check=True, cwd=repo).stdout
    to = effective(out.splitlines()).xla.get("xla_dump_to")
    if to:
        Path(to).mkdir(parents=True, exist_ok=True)
        (Path(to) / FILE_NAME).write_text("HloModule jit_train_step\n")
    steps = [f"completed step: {s}, seconds: 2.000, Tokens/s/device: {tgs:.3f}, loss: 7.0"
             for s in range(15)]
    path.write_text(out + "\n".join(steps) + "\n")


PROFILES = {"pag": params("pag", xla_flags=[f"--{PAG}=true"]),
            "nch8": params("nch8", env={"NCCL_NCHANNELS_PER_NET_PEER": "8"}),
            "mem95": params("mem95", env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"}),
            "evidence": params("evidence", wave="1", env={"ENABLE_XLA_DUMP": "1"})}


async def record(store: Store, sweep_id: int, repo: Path, logs: Path, profile: str,
                 backend_id: str) -> None:
    run = await store.runs.add(sweep_id, profile, PROFILES[profile], NODE, "t", "t")
    await store.runs.transition(run.id, RunState.ACTIVE, "started")
    job = await store.jobs.create(run, f"t{run.id}", f"xla-{profile}", NODE)
    log = logs / f"{backend_id}.log"
    job_log(repo, log, profile)
    await end_recorded(store, run.id, job.id, backend_id, log, 1000.0, None, None)


async def context(store: Store, sweep_id: int, facts: XlaFacts) -> SweepContext[XlaFacts]:
    return SweepContext(runs=await store.runs.of_sweep(sweep_id), nodes=expand_nodes(NODE),
                        gpu_memory_gib=192.0,
                        facts=facts, jobs=await store.jobs.of_sweep(sweep_id))


async def test_three_profiles_not_applied_one_way_stop_and_name_the_mechanism(
        store: Store, tmp_path: Path) -> None:
    """Issue 23 item 4: every profile was dropped as "not applied" and the sweep ended
    `done` on an exhausted catalog, offering `--apply`."""
    repo = toolkit(tmp_path, pre_exports=False)
    spec = spec_of(nodes=NODE)
    rec = await recorder(store, tmp_path, spec)
    facts = XlaFacts(env_file=str(repo / "configs/llama2-70b.env.sh (absent)"),
                     sourced_last=True)
    for i, profile in enumerate(("pag", "nch8")):
        await record(store, rec.sweep_id, repo, tmp_path, profile, str(7000 + i))
    assert plan_checks.not_applied_stop(await context(store, rec.sweep_id, facts)) is None
    await record(store, rec.sweep_id, repo, tmp_path, "mem95", "7002")
    ctx = await context(store, rec.sweep_id, facts)
    stop = adapter.plan(spec, ctx)
    assert isinstance(stop, Stop) and stop.rule == "xla.not_applied"
    assert all(f"{p} (job 70" in (stop.evidence or "") for p in ("pag", "nch8", "mem95"))
    # The stop's reason names the one way (`_env_TUNE_PROFILE` never reached train_env.sh);
    # each result's detail says what was measured.
    said = {"the stop": stop.reason}
    # The NCCL profile's reason says what was measured: train_env.sh's own 4 stayed, and
    # the model's env file (there is none) did not set it.
    nch8 = {r.profile: r for r in gather.results(ctx.runs, ctx.jobs)}["nch8"]
    assert nch8.outcome is Outcome.NOT_APPLIED
    said["nch8's detail"] = f"{nch8.detail}"
    # The evidence run's switch is listed (re-exported after train_env.sh) but was never
    # read: no dump was written, so it was not applied either.
    await record(store, rec.sweep_id, repo, tmp_path, "evidence", "7003")
    ctx = await context(store, rec.sweep_id, facts)
    evidence = {r.profile: r for r in gather.results(ctx.runs, ctx.jobs)}["evidence"]
    assert evidence.outcome is Outcome.NOT_APPLIED
    said["the evidence run's detail"] = f"{evidence.detail}"
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "not_applied_one_way.txt",
                       {k: scrubbed(v, tmp=tmp_path) for k, v in said.items()})
    # Resumed from this stop, the person chose to go on: it is not raised again.
    again = SweepContext(runs=ctx.runs, nodes=ctx.nodes, gpu_memory_gib=192.0, facts=facts,
                         jobs=ctx.jobs, acknowledged_stops=["xla.not_applied"])
    assert plan_checks.not_applied_stop(again) is None


async def test_the_same_profiles_through_a_toolkit_that_pre_exports_are_applied(
        store: Store, tmp_path: Path) -> None:
    repo = toolkit(tmp_path, pre_exports=True)
    rec = await recorder(store, tmp_path, spec_of(nodes=NODE))
    for i, profile in enumerate(PROFILES):
        await record(store, rec.sweep_id, repo, tmp_path, profile, str(7100 + i))
    ctx = await context(store, rec.sweep_id, XlaFacts(sourced_last=True))
    assert gather.unapplied(ctx.runs, ctx.jobs) == []
    assert {r.outcome for r in gather.results(ctx.runs, ctx.jobs)} == {Outcome.OK}


async def test_a_value_the_env_file_sets_is_named_as_the_env_files(store: Store,
                                                                   tmp_path: Path) -> None:
    repo = toolkit(tmp_path, pre_exports=True)
    # The model's env file sets the memory fraction after train_env.sh; without the `_env_`
    # passthrough that wins it back, its .97 wins over the arm's .95.
    (repo / "configs" / "llama2-70b.env.sh").write_text(
        "export XLA_PYTHON_CLIENT_MEM_FRACTION=.97\n")
    spec = spec_of(nodes=NODE)
    deployed, env_file = inventory.inventory(repo, spec)
    rec = await recorder(store, tmp_path, spec)
    await record(store, rec.sweep_id, repo, tmp_path, "mem95", "7200")
    ctx = await context(store, rec.sweep_id, XlaFacts(deployed=deployed, env_file=env_file,
                                                      sourced_last=True))
    [miss] = gather.unapplied(ctx.runs, ctx.jobs, deployed)
    assert miss.miss.cause == applied.ENV_FILE
    check_golden(GOLDEN / "xla_tuning_messages" / "env_file_culprit.txt",
                 scrubbed(f"{miss.miss.culprit}\n", tmp=tmp_path))


# --- the evidence run judged by its artifacts --------------------------------------------------

async def test_an_evidence_run_is_judged_by_its_dump_as_well_as_the_listing(
        store: Store, tmp_path: Path) -> None:
    """Issue 23: an evidence run whose dump exists was dropped as "not applied
    (ENABLE_XLA_DUMP is not set in the job's effective environment)"."""
    spec = spec_of()
    rec = await recorder(store, tmp_path, spec)
    evidence = params("evidence", wave="1", env={"ENABLE_XLA_DUMP": "1"},
                      overrides={"profiler": "xplane"})
    # The listing shows XLA_FLAGS, not the switch; one job writes its dump.
    with_dump = await rec.add(("evidence", evidence), tgs=990.0,
                              xla_line=f"XLA_FLAGS=--{PAG}=false", printed_env={},
                              dump="HloModule jit_train_step\n")
    without = await rec.add(("evidence", evidence), tgs=991.0,
                            xla_line=f"XLA_FLAGS=--{PAG}=false", printed_env={})
    jobs = {j.run_id: j for j in await store.jobs.of_sweep(rec.sweep_id)}
    dumped = jobs[with_dump]
    assert dumped.log_path and dumped.backend_id
    dump_dir = Path(dumped.log_path).parent / f"{dumped.backend_id}-{dumped.job_name}/xla_dump"
    assert (dump_dir / FILE_NAME).is_file()
    ctx = await rec.context()
    got = {r.job_id: r for r in gather.results(ctx.runs, ctx.jobs)}
    assert got[dumped.backend_id].outcome is Outcome.OK
    missing = got[jobs[without].backend_id or ""]
    assert missing.outcome is Outcome.NOT_APPLIED
    assert "ENABLE_XLA_DUMP is not set" in missing.detail
    assert "no HLO dump was written" in missing.detail


async def test_a_stored_slot_never_resolved_to_nodes_stops_under_its_rule(
        tmp_path: Path) -> None:
    """A spec stored with `node_count` and no nodes (admission freezes a slot's nodes; an
    older sweepd did not): the planner's check stops it, recorded under its rule, where the
    pass once failed on the empty nodelist."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = await parts.store.sweeps.create(
            "xla-tuning", "t", {"kind": "xla-tuning", "model": "llama2-70b", "node_count": 8,
                                "parallelism": "FSDP=8"})
        await parts.engine.step()
        sweep = await parts.store.sweeps.get(sweep_id)
        assert sweep.state == SweepState.AWAITING_DECISION
        [stop] = [e for e in await parts.store.events.of_sweep(sweep_id)
                  if e.to_state == SweepState.AWAITING_DECISION]
        assert stop.rule == SLOT_UNRESOLVED.id
        check_golden_cases(GOLDEN / "xla_plumbing" / "slot_unresolved_stop.txt", {
            "stop": stop.reason})
        assert stop.evidence == "partition=None node_count=8"
        assert await parts.store.jobs.of_sweep(sweep_id) == []
