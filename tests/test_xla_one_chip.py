"""xla-tuning on one device (issue 47, items 8 and 9).

A one-device program has no collectives: the catalog's families that act on collectives
alone are not run (rule `catalog.no_collectives`), on the device count (nodes x devices per
node) or on the evidence run's HLO dump holding none, and the verdict names them with the
evidence. The dump is read as a real TPU job writes it: `tests/fixtures/tpu_v5e/
2026-12-06-xla-evidence-dump/` is real MaxText's `jit_train_step` on the v5e chip (the
0.27 B model of tpu.yaml, batch 8, profiler on, JAX 0.10.2; XLA_FLAGS `--xla_dump_to=...
--xla_dump_hlo_as_text --xla_dump_hlo_module_re=jit_train_step`; `evidence.log.gz` its log),
`tests/fixtures/xla_dump_cpu8/` the same shape of program sharded over 8 host CPU devices
(`program.py.txt`, `--xla_force_host_platform_device_count=8`, JAX 0.10.2): all-gathers and
all-reduces. A model sweepd has no shape for is accepted on the local backend, as model
perf accepts it, and what that leaves unavailable is said at validate."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import GatherContext, PreflightContext
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Parallelism
from sweepd.kinds.xla_tuning.catalog.collectives import collective_only
from sweepd.kinds.xla_tuning.catalog.tpu_flags import tpu_catalog
from sweepd.kinds.xla_tuning.evidence import jobfacts, logread
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.plan import devices
from sweepd.kinds.xla_tuning.runs import preflight
from sweepd.kinds.xla_tuning.sim.tuning import TPU_SCENARIO
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.kinds.xla_tuning.waves.no_collectives import none_because, without_collectives
from sweepd.store.rows import Job
from tests.golden_files import GOLDEN, check_golden_cases
from tests.simrun import open_store, run, sim_config

FIXTURES = Path(__file__).parent / "fixtures"
CHIP_DUMP = FIXTURES / "tpu_v5e" / "2026-12-06-xla-evidence-dump"
CPU8_DUMP = FIXTURES / "xla_dump_cpu8"
COLLECTIVE_FAMILIES = {"acf", "acfag", "occ", "dpar", "aag"}
# The dump files found and the reasons the collective families are left out.
GOLDEN_DIR = GOLDEN / "xla_one_chip"


def _unzipped(src: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for gz in src.glob("module_*.gz"):
        with gzip.open(gz, "rb") as f, (dest / gz.name.removesuffix(".gz")).open("wb") as out:
            shutil.copyfileobj(f, out)


def _job(log_dir: Path) -> Job:
    return Job(**{
        "id": 2, "run_id": 2, "sweep_id": 1, "attempt": 1, "token": "t", "job_name": "m",
        "nodes": "tpu1", "backend_id": "10002", "log_path": str(log_dir / "10002-m.log"),
        "state": "done", "scheduler_state": None, "submitted_at": None, "ended_at": None,
        "log_offset": 0, "log_identity": None, "last_output_at": None, "phase": "",
        "last_step": None, "profiler": 1, "mem_used_gb": None, "mem_limit_gb": None,
        "summary_status": None, "summary_exit": None, "node_map_json": None, "tgs": None,
        "mfu": None, "failure_class": None, "failure_node": None, "failure_line": None,
        "failure_detail": None, "submit_deadline": None})  # type: ignore[arg-type]


def test_the_chips_real_dump_is_found_and_reads_no_collectives(tmp_path: Path) -> None:
    dump = tmp_path / "outputs" / "sweep-1" / "xla_dump-evidence"
    _unzipped(CHIP_DUMP, dump)
    # The trainer (MaxText) prints no environment: the dump is found from the run's own
    # XLA_FLAGS, under libtpu's file name (`...cl_933746096.after_optimizations.txt`).
    env = {"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_module_re=train_step"}
    found = jobfacts.dump_file(_job(tmp_path), logread.Effective(), env)
    assert found is not None
    check_golden_cases(GOLDEN_DIR / "chip_dump_found.txt", {
        "the file read, in the dump": str(found.relative_to(dump))})
    ev = jobfacts.read_evidence(found, 0.264, _job(tmp_path))
    assert ev is not None and ev.collectives == 0 and ev.shares == ((Cost.COMPUTE, 1.0),)
    assert jobfacts.memory_bytes(found) == 5_638_940_672   # its memory-usage report
    assert logread.hlo_evidence(found.read_text(), None).shares == ((Cost.COMPUTE, 1.0),)


def test_a_sharded_dump_reads_its_collectives() -> None:
    with gzip.open(next(CPU8_DUMP.glob("*.gz")), "rt") as f:
        text = f.read()
    found = {c.cost: c.count for c in logread.hlo_collectives(text)}
    assert sum(found.values()) >= 3 and Cost.ALL_REDUCE in found
    ev = logread.hlo_evidence(text, 0.01)
    assert ev.collectives and ev.collectives >= 3
    # Collectives in the dump win over a device count that said one.
    assert none_because(Inputs(Parallelism.parse("FSDP=1"), (), devices=1), ev) is None


def test_one_device_leaves_the_collective_families_out_on_its_count_alone() -> None:
    spec = XlaTuningSpec.model_validate(_tpu_spec())
    n, how = devices(spec, gpus_per_node=1)
    assert n == 1
    assert devices(spec, gpus_per_node=8)[0] == 8
    inp = Inputs(spec.parsed_parallelism(), tpu_catalog(spec.parsed_parallelism()),
                 devices=n, devices_how=how)
    assert {p.family for p in inp.catalog if collective_only(p)} == COLLECTIVE_FAMILIES
    out = without_collectives(inp, None)
    assert set(out.no_collectives) == COLLECTIVE_FAMILIES
    assert {p.family for p in out.catalog} == {"vmem", "tlhs", "tlhs0"}
    assert out.no_collectives_why.startswith("1 device (1 node(s)")
    # Eight devices and no dump read yet: nothing is left out.
    assert without_collectives(Inputs(inp.parallelism, inp.catalog, devices=8), None) is not inp
    assert without_collectives(Inputs(inp.parallelism, inp.catalog, devices=8),
                               None).no_collectives == ()
    # A dump with none says so whatever the count.
    ev = Evidence(((Cost.COMPUTE, 1.0),), "HLO dump of job 7", collectives=0)
    read = without_collectives(Inputs(inp.parallelism, inp.catalog, devices=8), ev)
    assert set(read.no_collectives) == COLLECTIVE_FAMILIES
    check_golden_cases(GOLDEN_DIR / "no_collectives_why.txt", {
        "devices, one chip": how, "left out on one device": out.no_collectives_why,
        "left out on a dump with none": read.no_collectives_why})


def _tpu_spec(**extra: Any) -> dict[str, Any]:
    return {"kind": "xla-tuning", "platform": "tpu", "model": "llama2-70b", "nodes": "tpu1",
            "parallelism": "FSDP=1", "per_device_batch_size": 8, **extra}


async def test_a_simulated_chip_sweep_runs_no_collective_family_and_says_why(
        tmp_path: Path) -> None:
    # The default config says 8 devices per node: the dump the simulated TPU job writes
    # (libtpu's name, where its XLA_FLAGS asks, no collective in it) is what decides.
    config = sim_config(tmp_path, TPU_SCENARIO)
    code, lines = await run(config, _tpu_spec(max_runs=6))
    assert code == EXIT_VERDICT, lines[-5:]
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = {r.id: r for r in await store.runs.of_sweep(sweep.id)}
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    profiles = {r.params.profile for r in runs.values()}
    assert len(jobs) == 6 and not profiles & COLLECTIVE_FAMILIES, profiles
    evidence = next(r for r in runs.values() if r.params.profile == "evidence")
    sent = evidence.params.env
    assert "ENABLE_XLA_DUMP" not in sent
    to = logread.parse_flags(sent["XLA_FLAGS"])["xla_dump_to"]
    assert Path(to).parent == config.daemon.outputs / "sweep-1"
    # A compilation cache of its own: a cached program is not compiled, so not dumped.
    assert evidence.params.overrides["jax_cache_dir"] == f"{to}/jax_cache"
    ev_job = next(j for j in jobs if j.run_id == evidence.id)
    assert ev_job.facts["evidence"]["collectives"] == 0
    check_golden_cases(GOLDEN_DIR / "sim_chip_dump_found.txt", {
        "the file read": Path(ev_job.facts["dump"]).name})
    # No job sent a dump flag in LIBTPU_INIT_ARGS (libtpu stops at start on one).
    assert all("xla_dump" not in " ".join(r.params.xla_flags) for r in runs.values())
    said = {c["kind"]: c for c in (sweep.verdict or {})["caveats"]}
    caveat = said["no_collectives"]
    assert caveat["rule"] == "catalog.no_collectives"
    assert set(caveat["profiles"]) == COLLECTIVE_FAMILIES
    assert "holds no collective op" in caveat["evidence"]


def test_libtpu_refuses_a_dump_flag_in_its_init_args_in_the_simulator() -> None:
    from sweepd.kinds.xla_tuning.catalog.landscape import RunKind
    from sweepd.kinds.xla_tuning.sim import tuningjob
    from sweepd.sim.scenario import load_scenario

    section = load_scenario(TPU_SCENARIO).section("tuning")
    got = tuningjob.resolve(section, 1, "1", "llama2-70b", {}, {},
                            {"LIBTPU_INIT_ARGS": "--xla_dump_to=/tmp/x"})
    assert got.outcome.kind is RunKind.UNKNOWN_FLAG


# ---- item 9: a model sweepd has no shape for -------------------------------------------


def test_an_unknown_model_is_accepted_on_the_local_backend_as_model_perf_does() -> None:
    data = _tpu_spec(model="maxtext-0.6b", overrides={"base_emb_dim": 1024})
    with pytest.raises(SpecError, match=r"unknown model 'maxtext-0\.6b'"):
        parse_spec(data)
    spec = parse_spec(data, local_node="tpu1")
    assert isinstance(spec, XlaTuningSpec) and spec.model == "maxtext-0.6b"
    said = spec.unknown_shape()
    assert said is not None and "base_emb_dim" in said
    assert "memory estimate" in said and "per-model prior flags" in said
    known = parse_spec(_tpu_spec(), local_node="tpu1")
    assert isinstance(known, XlaTuningSpec) and known.unknown_shape() is None


class _Backend:
    async def node_states(self, nodes: list[str]) -> dict[str, str]:
        return dict.fromkeys(nodes, "idle")

    async def others_jobs(self, partition: str | None) -> Any:
        from sweepd.clusters.base import Listing
        return Listing([], "none")


async def test_validate_says_what_an_unknown_model_leaves_unavailable() -> None:
    spec = parse_spec(_tpu_spec(model="maxtext-0.6b"), local_node="tpu1")
    assert isinstance(spec, XlaTuningSpec)
    checks = await preflight.checks(spec, PreflightContext(_Backend(), GatherContext(), None))
    shape = [c for c in checks if c.rule == "preflight.model_shape"]
    assert len(shape) == 1 and shape[0].ok and "no shape sweepd knows" in shape[0].text
