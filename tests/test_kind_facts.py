"""Facts once (issue 24): what a kind wants from its jobs' logs and files is extracted once
(the log's lines as the monitor reads them, the HLO dump when the job ends) and kept on the
job in the store; the gather, planner and report read the store, never a log or a dump."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sweepd.core import kind_facts
from sweepd.core.states import JobState, RunState
from sweepd.kinds.api import JobFacts
from sweepd.kinds.model_perf import gather as perf_gather
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.xla_tuning import report
from sweepd.kinds.xla_tuning.catalog.catalog import Cost
from sweepd.kinds.xla_tuning.evidence import jobfacts
from sweepd.kinds.xla_tuning.runs import gather
from sweepd.kinds.xla_tuning.sim.hlo import hlo_text
from sweepd.sim.logfmt import cluster_line, compiled_memory_line, memstats_lines
from sweepd.store.rows import RunParams
from sweepd.store.store import Store
from tests.support.xla import (
    IMAGE_LINE,
    Recorder,
    follow_to_the_end,
    params,
    recorder,
    spec_of,
)

# Every file opened for reading under a watched directory, by path (the interpreter's audit
# hook: any open, whatever reads it; the test's own writes of logs are not counted). An
# audit hook cannot be removed: it counts only while watched.
_WATCHED: list[tuple[str, dict[str, int]]] = []


def _reading(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode and "+" not in mode
    return isinstance(flags, int) and flags & os.O_ACCMODE == os.O_RDONLY


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WATCHED or not isinstance(args[0], str | bytes | Path) \
            or not _reading(args[1], args[2]):
        return
    path = os.fsdecode(args[0])
    for root, counts in _WATCHED:
        if path.startswith(root):
            counts[path] = counts.get(path, 0) + 1


sys.addaudithook(_audit)


@contextmanager
def opens_under(root: Path) -> Iterator[dict[str, int]]:
    counts: dict[str, int] = {}
    _WATCHED.append((str(root), counts))
    try:
        yield counts
    finally:
        _WATCHED.remove((str(root), counts))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "state.db")
    yield s
    await s.close()


FLAG = "--xla_gpu_enable_pipelined_all_gather=true"
A2A = {Cost.ALL_TO_ALL: 0.45, Cost.ALL_GATHER: 0.05, Cost.REDUCE_SCATTER: 0.02}


async def a_recorded_wave(rec: Recorder) -> None:
    """Jobs of every outcome the gather tells apart, each with what its log printed: a
    measured baseline and profile, one whose value lost (last wins), an env-var profile, a
    flake whose log names an unknown flag, the evidence run with its HLO dump, and the
    simulated cluster's clock in each log."""
    spans = iter(cluster_line(3600.0 * i, 3600.0 * (i + 1)) for i in range(10))
    await rec.add(("baseline", params("baseline")), tgs=1000.0, loss=7.25, extra=[next(spans)])
    await rec.add(("fast", params("fast", xla_flags=[FLAG])), tgs=1080.0, extra=[next(spans)])
    lost = f"{IMAGE_LINE} {FLAG} --xla_gpu_enable_pipelined_all_gather=false"
    await rec.add(("lost", params("lost", xla_flags=[FLAG])), tgs=1100.0, xla_line=lost,
                  extra=[next(spans)])
    await rec.add(("nccl", params("nccl", env={"NCCL_NCHANNELS_PER_NET_PEER": "8"})),
                  tgs=1001.0, extra=[next(spans)])
    await rec.add(("flaky", params("flaky")), klass="rccl_flake",
                  extra=["Unknown flags in XLA_FLAGS: --xla_gpu_typo=1", next(spans)])
    evidence = params("evidence", wave="1", env={"ENABLE_XLA_DUMP": "1"})
    await rec.add(("evidence", evidence), tgs=950.0, extra=[next(spans)],
                  dump=hlo_text(A2A, 2.1, 8, 80))


async def everything_read(store: Store, sweep_id: int) -> dict[str, Any]:
    """What the planner's results, the time rules, the evidence and the report make of the
    sweep."""
    sweep, runs, jobs = (await store.sweeps.get(sweep_id), await store.runs.of_sweep(sweep_id),
                         await store.jobs.of_sweep(sweep_id))
    return {"results": gather.results(runs, jobs),
            "unapplied": gather.unapplied(runs, jobs),
            "queue": gather.queue_time(jobs),
            "evidence": gather.evidence(runs, jobs),
            "report": report.markdown(sweep, runs, jobs)}


async def test_the_gather_gives_the_same_answers_with_every_log_and_dump_deleted(
        store: Store, tmp_path: Path) -> None:
    """Once a job's facts are stored, its log and HLO dump are never needed again: deleted,
    and the store reopened as a restarted daemon would, every reader answers the same."""
    logs = tmp_path / "logs"
    logs.mkdir()
    rec = await recorder(store, logs, spec_of())
    await a_recorded_wave(rec)
    before = await everything_read(store, rec.sweep_id)
    # The facts tell the outcomes apart (so the comparison below compares something).
    outcomes = {r.profile: str(r.outcome) for r in before["results"]}
    assert outcomes == {"baseline": "ok", "fast": "ok", "lost": "not_applied", "nccl": "ok",
                        "flaky": "unknown_flag", "evidence": "ok"}
    assert before["evidence"] is not None and before["evidence"].dominant()[0] is Cost.ALL_TO_ALL
    assert sorted(before["queue"].values()) == [3600.0] * 6
    for path in sorted(logs.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    assert list(logs.iterdir()) == []
    await store.close()
    reopened = await Store.open(tmp_path / "state.db")
    try:
        with opens_under(logs) as opened:
            after = await everything_read(reopened, rec.sweep_id)
        assert after == before
        assert opened == {}
    finally:
        await reopened.close()


async def test_each_log_and_dump_is_opened_once_however_often_the_sweep_is_planned(
        store: Store, tmp_path: Path) -> None:
    """The log pass opens each log once (kept open while followed), the job's end opens the
    evidence run's dump once; the plans and reports after it open neither."""
    rec = await recorder(store, tmp_path, spec_of())
    with opens_under(tmp_path) as opened:
        await a_recorded_wave(rec)
        for _ in range(5):
            await everything_read(store, rec.sweep_id)
    jobs = await store.jobs.of_sweep(rec.sweep_id)
    logs = {j.log_path for j in jobs}
    assert {p: n for p, n in opened.items() if p in logs} == {p: 1 for p in logs if p}
    dumps = [p for p in opened if p.endswith("_gpu_after_optimizations.txt")]
    assert len(dumps) == 1 and opened[dumps[0]] == 1


def counting(hook: JobFacts, seen: list[str]) -> JobFacts:
    def lines(facts: Any, batch: Sequence[str]) -> Any:
        seen.extend(batch)
        return hook.lines(facts, batch)
    return JobFacts(lines, hook.ended)


async def test_a_restarted_follower_folds_only_new_lines_into_the_stored_facts(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Facts are stored with the log's offset: a daemon restarted between two parts of a
    log reads the stored facts back and folds only the lines written since; the facts are
    those of one read of the whole log, each line folded once."""
    real = kind_facts.hook_of
    seen: list[str] = []
    monkeypatch.setattr(kind_facts, "hook_of", lambda k: (
        None if (h := real(k)) is None else counting(h, seen)))
    first = [f"{IMAGE_LINE}", "export NCCL_PROTO=LL", "3: NCCL_PROTO=ignored",
             "Unknown flag: --xla_a"]
    then = [f"{IMAGE_LINE} {FLAG}", "export NCCL_PROTO=Simple", "Unknown flag: --xla_b",
            "Unknown flags in XLA_FLAGS: --xla_a", cluster_line(10.0, 20.0)]
    rec = await recorder(store, tmp_path, spec_of())
    run_id = await rec.add(("p", params("p")), finish=False)
    run = await store.runs.get(run_id)
    await store.runs.transition(run.id, RunState.ACTIVE, "started")
    job = await store.jobs.create(run, "tok", "xla-p", "n01")
    log = tmp_path / "p.log"
    log.write_text("\n".join(first) + "\n")
    await store.jobs.transition(job.id, JobState.QUEUED, "queued", backend_id="77",
                                    log_path=str(log))
    await store.jobs.transition(job.id, JobState.RUNNING, "running")
    await follow_to_the_end(store, job.id)
    await store.close()
    with log.open("a") as f:
        f.write("\n".join(then) + "\n")
    reopened = await Store.open(tmp_path / "state.db")
    try:
        await follow_to_the_end(reopened, job.id)
        facts = (await reopened.jobs.get(job.id)).facts
    finally:
        await reopened.close()
    assert seen == first + then
    assert facts == jobfacts.fold({}, first + then)
    assert facts["env"]["NCCL_PROTO"] == "Simple"     # last wins; rank 3's line ignored
    assert facts["xla"].endswith(FLAG)
    assert facts["unknown"] == ["xla_a", "xla_b"]
    assert facts["span"] == [10.0, 20.0]


def test_a_batch_that_adds_nothing_stores_nothing() -> None:
    facts = jobfacts.fold({}, ["export NCCL_PROTO=LL", "Unknown flag: --xla_a"])
    assert facts == {"env": {"NCCL_PROTO": "LL"}, "unknown": ["xla_a"]}
    assert jobfacts.fold(facts, ["export NCCL_PROTO=LL", "Unknown flag: --xla_a"]) is None
    assert jobfacts.fold(facts, ["completed step: 3, seconds: 2.0", "no assignment"]) is None


def test_past_the_key_limit_only_the_tuned_families_are_kept() -> None:
    """A log printing thousands of distinct variables keeps MAX_KEYS of them, and every
    NCCL/RCCL/XLA_PYTHON_CLIENT one whatever the count."""
    many = [f"V{i}=x" for i in range(jobfacts.MAX_KEYS + 10)]
    facts = jobfacts.fold({}, [*many, "NCCL_ALGO=Ring"]) or {}
    assert len(facts["env"]) == jobfacts.MAX_KEYS + 1 and facts["env"]["NCCL_ALGO"] == "Ring"
    assert "V0" in facts["env"] and f"V{jobfacts.MAX_KEYS + 5}" not in facts["env"]


def test_no_credential_a_job_printed_is_kept() -> None:
    lines = ["HF_TOKEN=hf_abc", "WANDB_API_KEY=w1", "AWS_SECRET_ACCESS_KEY=s", "DB_PASSWORD=p",
             "SSH_KEY=k", "NCCL_PROTO=Simple", "MY_FLAG=1", "KEYBOARD=us"]
    facts = jobfacts.fold({}, lines) or {}
    assert facts["env"] == {"NCCL_PROTO": "Simple", "MY_FLAG": "1", "KEYBOARD": "us"}


async def test_model_perfs_gather_reads_the_compiled_memory_the_log_pass_stored(
        store: Store, tmp_path: Path) -> None:
    """Model perf's param memory is the Memstats line the log pass stored on the job (the
    compiled-memory line beside it): its gather opens no log, even one deleted."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-2]",
                       "min_nodes": 1})
    assert isinstance(spec, ModelPerfSpec)
    sweep_id = await store.sweeps.create("model-perf", "m", spec.model_dump(mode="json"))
    run = await store.runs.add(sweep_id, "b1",
                                   RunParams(overrides={"per_device_batch_size": 1}),
                                   spec.nodes, "test", "test")
    await store.runs.transition(run.id, RunState.ACTIVE, "started")
    job = await store.jobs.create(run, "tok", "m", spec.nodes)
    log = tmp_path / "m.log"
    log.write_text("\n".join([*memstats_lines(41.5, 178.5),
                              compiled_memory_line(1.0, 20.0, 30.0, 0.0)]) + "\n")
    await store.jobs.transition(job.id, JobState.QUEUED, "queued", backend_id="9",
                                    log_path=str(log))
    await store.jobs.transition(job.id, JobState.RUNNING, "running")
    await follow_to_the_end(store, job.id)
    stored = await store.jobs.get(job.id)
    assert (stored.mem_used_gb, stored.mem_temp_gb) == (41.5, 20.0)
    log.unlink()
    with opens_under(tmp_path) as opened:
        facts = await perf_gather.gather(store, spec)
    assert facts.param_gb == 41.5
    assert opened == {}


async def test_jobs_that_ended_before_facts_were_kept_are_backfilled_once_at_start(
        store: Store, tmp_path: Path) -> None:
    """A store from before schema version 8 has ended jobs without facts: at start each
    such log is read once and its facts stored, the same as the log pass would have; the
    next start reads nothing."""
    rec = await recorder(store, tmp_path, spec_of())
    await a_recorded_wave(rec)
    jobs = await store.jobs.of_sweep(rec.sweep_id)
    kept = {j.id: j.facts for j in jobs}
    before = await everything_read(store, rec.sweep_id)
    for job in jobs:   # as a store written before the facts were kept
        await store.jobs.update(job.id, facts_json=None)
    assert all(j.facts == {} for j in await store.jobs.of_sweep(rec.sweep_id))
    with opens_under(tmp_path) as opened:
        assert await kind_facts.backfill(store) == len(jobs)
    assert {j.id: j.facts for j in await store.jobs.of_sweep(rec.sweep_id)} == kept
    assert await everything_read(store, rec.sweep_id) == before
    assert sorted(n for p, n in opened.items() if p.endswith(".log")) == [1] * len(jobs)
    with opens_under(tmp_path) as again:
        assert await kind_facts.backfill(store) == 0
    assert again == {}
