"""The xla-tuning kind's engine side: its spec, the planner adapter over a real store, the
gather of job results (OOM, unknown flag, flake, not applied), the frozen nodelist, and the
`<MODEL_TAG>-tuning.md` report whose numbers are the store's."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sweepd.app.foreground import EXIT_AWAITING_DECISION
from sweepd.config import PolicyConfig
from sweepd.core.policy import Act, Case, SweepFacts, decide
from sweepd.kinds.api import Finished, NewRun, Stop
from sweepd.kinds.registry import kinds
from sweepd.kinds.xla_tuning import plan as adapter
from sweepd.kinds.xla_tuning import report
from sweepd.kinds.xla_tuning.catalog.catalog import Cost
from sweepd.kinds.xla_tuning.evidence import logread
from sweepd.kinds.xla_tuning.evidence.results import Outcome
from sweepd.kinds.xla_tuning.inventory.planner_facts import ModelPerfPrior, XlaFacts
from sweepd.kinds.xla_tuning.runs import gather
from sweepd.kinds.xla_tuning.runs.run_params import Batch, batch_of
from sweepd.kinds.xla_tuning.sim.hlo import hlo_text
from sweepd.kinds.xla_tuning.spec import XlaTuningSpec
from sweepd.monitor.facts import FailureClass, Verdict
from sweepd.reports.stop import stop_message
from sweepd.sim.logfmt import cluster_line
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import NODES, open_store, run, sim_config, write_scenario
from tests.support.xla import (  # noqa: F401
    IMAGE_LINE,
    NODE,
    SPEC,
    Recorder,
    end_recorded,
    follow_to_the_end,
    params,
    recorder,
    spec_of,
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "state.db")
    yield s
    await s.close()



def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        XlaTuningSpec.model_validate(data)
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in caught.value.errors())


# --- the spec ---------------------------------------------------------------------------

@pytest.mark.parametrize("missing", ["model", "parallelism"])
def test_a_spec_without_model_or_parallelism_is_refused_naming_it(missing: str) -> None:
    data = {k: v for k, v in SPEC.items() if k != missing}
    assert f"{missing}: Field required" in refusal(data)


def test_each_bad_spec_is_refused_with_its_whole_line() -> None:
    """The spec's refusals a new user reads, each whole, in one golden: the three forms of a
    cluster slot, DCN axes against the nodes, TP against a node's GPUs (the cluster's,
    tests/test_tp_per_node.py), the profiles, the slot given twice, the primary tag."""
    no_slot = {k: v for k, v in SPEC.items() if k != "nodes"}
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "spec_refusals.txt", {
        "no cluster slot": refusal(no_slot),
        "DCN axes short of the nodes": refusal({**SPEC, "parallelism": "FSDP=4"}),
        "DCN axes over the nodes": refusal({**SPEC, "nodes": "n[01-02]"}),
        "TP not dividing a node": str(spec_of(parallelism="FSDP=8,TP=3").cluster_problem(8)),
        "baseline as a profile": refusal(
            {**SPEC, "profiles": [{"name": "baseline", "settings": {"xla_x": "1"}}]}),
        "a profile twice": refusal({**SPEC, "profiles": [SPEC["profiles"][0]] * 2}),
        "nodes and node_count": refusal({**SPEC, "node_count": 1}),
        "replace without profiles": refusal({**SPEC, "profiles": []}),
        "unknown primary tag": refusal({**SPEC, "primary_tag": "x"}),
    })


def test_dcn_axes_must_span_the_nodes_and_tp_a_nodes_gpus() -> None:
    assert spec_of(parallelism="FSDP=8,TP=3").cluster_problem(8) is not None
    two = spec_of(nodes="n[01-02]", parallelism="PP=2,TP=8")
    assert two.ranks == 16 and two.needed_nodes == 2
    assert spec_of(nodes="n[01-02]", parallelism="PP=2").ranks == 2
    slot = {k: v for k, v in SPEC.items() if k != "nodes"}
    assert XlaTuningSpec.model_validate({**slot, "partition": "gpu", "node_count": 2,
                                         "parallelism": "FSDP=2"}).count == 2


def test_inputs_carry_the_catalog_tags_and_thresholds() -> None:
    spec = spec_of(thresholds={"win": 0.03, "max_queue_hours": 2.0},
                   config_tags={"sparse": {"sparse_matmul": "true"}, "dense": {}})
    inp = spec.inputs()
    assert [p.name for p in inp.catalog] == ["fast", "slow"]
    assert inp.tags == ("sparse", "dense") and inp.win == 0.03 and inp.max_queue_s == 7200.0
    extended = spec_of(catalog="extend").inputs()
    assert len(extended.catalog) > 30 and extended.catalog[-1].name == "slow"


# --- a real store with recorded jobs ------------------------------------------------------













# --- the planner adapter -------------------------------------------------------------------

async def test_wave1_runs_carry_rule_reason_and_exactly_the_agreed_params(
        store: Store, tmp_path: Path) -> None:
    spec = spec_of(config_tags={"sparse": {"sparse_matmul": "true"}, "dense": {}})
    rec = await recorder(store, tmp_path, spec)
    planned = adapter.plan(spec, await rec.context(facts=XlaFacts(ModelPerfPrior(3, 6))))
    assert isinstance(planned, list)
    assert [(n.label, n.params.tag, n.params.profile, n.params.labels) for n in planned] == [
        ("baseline", "sparse", "baseline", {"wave": "1"}),
        ("baseline@dense", "dense", "baseline", {"wave": "1"}),
        ("evidence", "sparse", "evidence", {"wave": "1"})]
    for n in planned:
        assert n.rule.startswith(("wave1.", "wave1_5.")) and n.reason.startswith("wave 1: ")
        assert list(n.nodes) == expand_nodes(NODE)
        over = n.params.overrides
        assert over["steps"] == 15 and over["dataset_type"] == "synthetic"
        assert over["per_device_batch_size"] == 6
        # The parallelism reaches the job as the SKILL.md's submission template passes it.
        assert over["dcn_fsdp_parallelism"] == 8
        assert "ici_tensor_parallelism" not in over and "dcn_pipeline_parallelism" not in over
        assert n.params.xla_flags == [] and n.params.model is None
    assert planned[0].params.overrides["sparse_matmul"] == "true"
    assert "sparse_matmul" not in planned[1].params.overrides
    # Each reason whole (the batch size's source, model-perf sweep 3's optimum, among them).
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "wave1_reasons.txt",
                       {n.label: n.reason for n in planned})
    evidence = planned[2].params
    assert evidence.overrides["profiler"] == "xplane"
    assert evidence.env == {"ENABLE_XLA_DUMP": "1"}


def test_the_batch_size_says_where_it_came_from() -> None:
    prior = XlaFacts(ModelPerfPrior(3, 6))
    assert batch_of(spec_of(per_device_batch_size=4), prior).source == "the spec"
    assert batch_of(spec_of(), XlaFacts()).source.startswith("the config's value")
    assert batch_of(spec_of(), XlaFacts()).value is None
    assert batch_of(spec_of(), prior) == Batch(6, "model-perf sweep 3's optimum")


async def test_a_sweep_runs_to_a_proposal_through_the_adapter(store: Store, tmp_path: Path) -> None:
    """Each wave recorded in the store as the engine would: the adapter ends with the
    winner that is really faster, and every run it asked for had a rule and a reason."""
    spec = spec_of()
    rec = await recorder(store, tmp_path, spec)
    true_tgs = {"baseline": 1000.0, "evidence": 990.0, "fast": 1080.0, "slow": 985.0}
    wobble = iter([0.0, 1.5, -1.5, 2.0, -2.0, 0.5, -0.5] * 20)
    for _ in range(20):
        decision = adapter.plan(spec, await rec.context())
        if not isinstance(decision, list):
            break
        assert decision, "the adapter waits only while runs are open"
        for new in decision:
            assert new.rule and new.reason
            parts = (new.params.profile or "").split("+")
            tgs = statistics.fmean(true_tgs.get(p, 1000.0) for p in parts) + next(wobble)
            await rec.add(new, tgs=tgs)
    assert isinstance(decision, Finished) and decision.ok
    assert decision.verdict["recipe"] == "fast" and decision.verdict["rule"] == "stop.winner"
    assert decision.verdict["gain"] == pytest.approx(0.08, abs=0.01)
    assert decision.summary.startswith("proposal: fast +")
    assert decision.verdict["top"][0]["profile"] == "fast"


async def test_a_node_out_of_use_stops_with_the_skill_md_message(store: Store,
                                                                 tmp_path: Path) -> None:
    spec = spec_of(nodes="n[01-02]", parallelism="FSDP=2")
    rec = await recorder(store, tmp_path, spec)
    await rec.add(("baseline", params("baseline")), tgs=1000.0)
    await rec.add(("fast", params("fast")), tgs=1050.0)
    await rec.add(("slow", params("slow")), tgs=990.0)
    await rec.add(("ovl", params("ovl")), finish=False)
    decision = adapter.plan(spec, await rec.context(nodes=("n01",)))
    assert isinstance(decision, Stop) and decision.rule == "nodes.frozen"
    assert decision.evidence == "n02"
    # The message every stop of the sweep sends (core's, with the kind's own state lines).
    sweep = await store.sweeps.get(rec.sweep_id)
    runs, jobs = await store.runs.of_sweep(sweep.id), await store.jobs.of_sweep(sweep.id)
    kind = kinds()["xla-tuning"]
    assert kind.stops.state is adapter.stop_state
    own = adapter.stop_state(sweep, runs, jobs)
    text = stop_message(sweep, decision.reason, ["n02"], "none", "stopped by the sweep's own "
                        "rule", spec.nodes, runs, jobs, own=own)
    assert text.splitlines()[2] == f"Reason: {decision.reason}"
    # The message a person reads, whole: the kind's state lines (best so far, pending).
    check_golden(GOLDEN / "xla_tuning_messages" / "stop_message.txt", scrubbed(text, tmp=tmp_path))
    # Another kind keeps the generic lines.
    generic = stop_message(sweep, "why", [], "none", "x", spec.nodes, runs, jobs)
    assert generic.startswith("[xla-tuning STOP]")
    assert "Profiles tested" not in generic and "Runs finished so far: 3" in generic


def test_a_node_fault_stops_a_frozen_sweep_and_excludes_nothing() -> None:
    verdict = Verdict(FailureClass.GPU_HARDWARE, evidence="HSA_STATUS_ERROR", node="n02")
    facts = SweepFacts(["n01", "n02"], [], 2, frozen_nodes=True)
    action = decide(Case(verdict, [], facts, PolicyConfig()))
    assert action.act is Act.STOP and action.exclude is None
    assert action.rule == "fault.frozen_nodelist"
    # Without the flag the same fault excludes the node and retries (other kinds).
    moved = decide(Case(verdict, [], SweepFacts(["n01", "n02"], [], 1), PolicyConfig()))
    assert moved.act is Act.RETRY and moved.exclude == "n02"


# --- gather from the store ------------------------------------------------------------------

async def test_gather_classifies_each_recorded_job(store: Store, tmp_path: Path) -> None:
    spec = spec_of()
    rec = await recorder(store, tmp_path, spec)
    flag = "--xla_gpu_enable_pipelined_all_gather=true"
    await rec.add(("baseline", params("baseline")), tgs=1000.0, loss=7.25)
    await rec.add(("fast", params("fast", xla_flags=[flag])), tgs=1080.0)
    await rec.add(("big", params("big")), klass="oom", detail="12.50GiB")
    await rec.add(("typo", params("typo")), klass="unknown_flag", detail="xla_gpu_typo")
    await rec.add(("flaky", params("flaky")), klass="rccl_flake")
    await rec.add(("gone", params("gone")), klass="cancelled")
    # The env file appended its own value after the profile's: last wins, the profile lost.
    lost = f"{IMAGE_LINE} {flag} --xla_gpu_enable_pipelined_all_gather=false"
    await rec.add(("lost", params("lost", xla_flags=[flag])), tgs=1100.0, xla_line=lost)
    await rec.add(("nccl", params("nccl", env={"NCCL_NCHANNELS_PER_NET_PEER": "8"})),
                  tgs=1001.0)
    await rec.add(("waiting", params("waiting")), finish=False)
    ctx = await rec.context()
    got = {r.profile: r for r in gather.results(ctx.runs, ctx.jobs)}
    assert "gone" not in got  # a cancel says nothing about the flags
    base = got["baseline"]
    assert (base.outcome, base.tgs, base.job_id, base.queue_s) == (Outcome.OK, 1000.0, "5001",
                                                                   600.0)
    assert base.loss == pytest.approx(7.25 + 1 - 14 / 15, abs=1e-3)
    assert base.step_s == pytest.approx(statistics.fmean(2 + s / 100 for s in range(5, 15)))
    assert got["fast"].outcome is Outcome.OK and got["nccl"].outcome is Outcome.OK
    assert (got["big"].outcome, got["big"].detail) == (Outcome.OOM, "12.50GiB")
    assert (got["typo"].outcome, got["typo"].detail) == (Outcome.UNKNOWN_FLAG, "xla_gpu_typo")
    assert got["flaky"].outcome is Outcome.FLAKE
    assert got["lost"].outcome is Outcome.NOT_APPLIED
    assert got["lost"].detail is not None
    check_golden(GOLDEN / "xla_tuning_messages" / "not_applied_detail.txt",
                 got["lost"].detail + "\n")
    assert got["waiting"].outcome is Outcome.PENDING and got["waiting"].wave == 2


def test_the_log_reader_knows_both_unknown_flag_lines() -> None:
    lines = ["parse_flags_from_env.cc:226] Unknown flags in XLA_FLAGS: --xla_a=1 --xla_b=2",
             "Unknown flag: --xla_c"]
    assert logread.unknown_flags_in(lines) == ("xla_a", "xla_b", "xla_c")


async def test_the_planner_drops_an_unknown_flag_at_once_and_retries_a_flake(
        store: Store, tmp_path: Path) -> None:
    spec = spec_of()
    rec = await recorder(store, tmp_path, spec)
    for p in ("baseline", "evidence"):
        await rec.add((p, params(p, wave="1")), tgs=1000.0)
    await rec.add(("baseline", params("baseline", wave="1")), tgs=1001.0)
    await rec.add(("fast", params("fast")), klass="unknown_flag", detail="xla_gpu_enable_x")
    await rec.add(("slow", params("slow")), klass="rccl_flake")
    decision = adapter.plan(spec, await rec.context())
    assert isinstance(decision, list)
    assert [(n.label, n.rule) for n in decision] == [("slow #2", "failure.flake_retry")]
    assert decision[0].reason.startswith("wave 2: flake 1/3")


# --- the report -------------------------------------------------------------------------

async def recorded_sweep(store: Store, tmp_path: Path, spec: XlaTuningSpec,
                         tgs: dict[str, list[float]]) -> Recorder:
    rec = await recorder(store, tmp_path, spec)
    for profile, values in tgs.items():
        flags = ["--xla_gpu_enable_pipelined_all_gather=true"] if profile == "fast" else []
        for value in values:
            await rec.add((profile, params(profile, xla_flags=flags)), tgs=value)
    await rec.add(("typo", params("typo")), klass="unknown_flag", detail="xla_gpu_typo")
    return rec


async def test_the_tuning_md_has_ten_sections_with_the_stores_numbers(
        store: Store, tmp_path: Path) -> None:
    spec = spec_of()
    rec = await recorded_sweep(store, tmp_path, spec, {
        "baseline": [1000.0, 1004.0], "evidence": [990.0], "fast": [1080.0, 1086.0],
        "slow": [980.0]})
    await store.sweeps.transition(rec.sweep_id, "running", "started")
    await store.sweeps.transition(rec.sweep_id, "done", "verdict", verdict={
        "recipe": "fast", "reason": "fast confirmed >= +5% over baseline-deployed",
        "rule": "stop.winner"})
    sweep = await store.sweeps.get(rec.sweep_id)
    runs, jobs = await store.runs.of_sweep(rec.sweep_id), await store.jobs.of_sweep(rec.sweep_id)
    out = report.write_tuning_md(tmp_path, sweep, runs, jobs)
    assert out.name == "llama2-70b-tuning.md"
    text = out.read_text()
    sections = ["# llama2-70b XLA / NCCL tuning", "## TL;DR", "## Inventory (FSDP=8)",
                "## Effect of llama2-70b.env.sh on FSDP=8", "## Tuning leaderboard (FSDP=8)",
                "## Why the winning flag wins (FSDP=8)", "## Negative findings (FSDP=8)",
                "## Recommended deployment (FSDP=8)", "## Appendix: data sources (FSDP=8)"]
    for s in sections:
        assert s in text, s
    assert "- Date: " in text  # the header bullets: the tenth section
    fast_jobs = [j for j in jobs if j.tgs in (1080.0, 1086.0)]
    mean = statistics.fmean(j.tgs or 0.0 for j in fast_jobs)
    base = statistics.fmean([1000.0, 1004.0])
    ids = ", ".join(j.backend_id or "" for j in fast_jobs)
    # The file's wording is tests/golden/xla_tuning_messages/tuning_md.txt's
    # (test_xla_tuning_report_cli);
    # here its numbers: the leaderboard's first row is fast's jobs, mean and delta.
    assert f"| 1 | fast ⭐ ({ids}) |" in text and f"| {mean:.1f} |" in text
    assert f"{mean / base - 1:+.2%}" in text
    for j in jobs:
        assert f"| {j.backend_id} |" in text
    rows = report.report_json(sweep, runs, jobs)
    assert rows["winner"] == "fast" and rows["leaderboard"][0]["tgs"] == mean
    first = rows["leaderboard"][0]
    assert first["profile"] == "fast" and first["job_ids"] == [j.backend_id for j in fast_jobs]
    assert abs(first["delta"] - (mean / base - 1)) < 1e-12
    typo = rows["leaderboard"][-1]
    assert (typo["profile"], typo["n"], typo["detail"]) == ("typo", 0, "xla_gpu_typo")
    assert "- typo (5007): " in text
    # The table a person reads: each profile's flags beside its short name; the Δ said for
    # what it reads (all runs).
    table = report.markdown(sweep, runs, jobs)
    check_golden(GOLDEN / "xla_tuning_messages" / "report_table.txt", table)
    png = report.plot(sweep, runs, jobs)
    assert png is not None and png.startswith(b"\x89PNG")


async def test_another_parallelism_extends_the_file_with_the_sign_flip_table(
        store: Store, tmp_path: Path) -> None:
    first = await recorded_sweep(store, tmp_path, spec_of(), {
        "baseline": [1000.0, 1000.0], "fast": [1080.0, 1080.0], "slow": [1010.0]})
    sweep = await store.sweeps.get(first.sweep_id)
    report.write_tuning_md(tmp_path, sweep, await store.runs.of_sweep(sweep.id),
                           await store.jobs.of_sweep(sweep.id))
    pp = spec_of(parallelism="PP=8")
    second = await recorded_sweep(store, tmp_path, pp, {
        "baseline": [900.0, 900.0], "fast": [850.0, 850.0], "slow": [945.0, 945.0]})
    sweep2 = await store.sweeps.get(second.sweep_id)
    path = report.write_tuning_md(tmp_path, sweep2, await store.runs.of_sweep(sweep2.id),
                                  await store.jobs.of_sweep(sweep2.id))
    text = path.read_text()
    # One title, both parallelisms' inventories, and the sign-flip table with fast's flip
    # only: slow's FSDP=8 delta is one run of +1 %, within noise, no ground for a sign flip
    # (issue 21: sign-flip marks only from confirmed deltas).
    headings = [line for line in text.splitlines() if line.startswith("#")]
    check_golden_cases(GOLDEN / "xla_kind" / "two_parallelisms_headings.txt", {
        "headings": "\n".join(headings)})
    flips = headings.index("## Sign flips vs other parallelisms")
    table = text.split(headings[flips])[1].split("\n## ")[0]
    rows = [r.split("|")[1:-1] for r in table.splitlines() if r.startswith("| ")][1:]
    assert [[c.strip() for c in r] for r in rows] == [["fast", "+8.00%", "-5.56%", "yes"]]


# --- the engine on the simulated cluster ---------------------------------------------------

async def test_a_node_fault_on_the_sim_stops_the_sweep_without_touching_the_nodelist(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, faults=[{"kind": "hsa_error", "node": "chi2867",
                                                 "times": 1}])
    config = sim_config(tmp_path, scenario)
    spec = {"kind": "xla-tuning", "model": "llama2-70b", "nodes": NODES,
            "parallelism": "FSDP=8"}
    code, lines = await run(config, spec)
    assert code == EXIT_AWAITING_DECISION, lines
    s = await open_store(config)
    try:
        sweep = (await s.sweeps.all())[0]
        assert await s.exclusions.of_sweep(sweep.id, active_only=False) == []
        jobs = await s.jobs.of_sweep(sweep.id)
        assert all(j.nodes == NODES for j in jobs)  # never fewer nor other nodes
        failed = [j for j in jobs if j.failure_class == "gpu_hardware"]
        assert [j.failure_node for j in failed] == ["chi2867"]
        stops = [e for e in await s.events.of_sweep(sweep.id) if e.rule == "fault.frozen_nodelist"]
        assert stops and "HSA_STATUS_ERROR" in (stops[0].evidence or "")
        message = next(e.reason for e in await s.events.of_sweep(sweep.id, kind="progress")
                       if "STOP]" in e.reason)
        # The whole message, naming the SKILL.md's partial deliverable written at the stop
        # from what ran so far.
        partial = config.daemon.outputs / f"sweep-{sweep.id}" / "llama2-70b-tuning.md"
        check_golden(GOLDEN / "xla_tuning_messages" / "sim_fault_stop.txt",
                     re.sub(r"State=\w+", "State=<state>",  # idle or not: a race
                            scrubbed(message + "\n", outputs=config.daemon.outputs)))
        check_golden_cases(GOLDEN / "xla_kind" / "partial_at_the_stop_headings.txt", {
            "headings": "\n".join(ln for ln in partial.read_text().splitlines()
                                   if ln.startswith("#"))})
    finally:
        await s.close()


# --- the Wave 1.5 evidence orders Wave 2 -----------------------------------------------------

async def wave2_after_evidence(store: Store, tmp_path: Path, dump: dict[Cost, float] | None,
                               in_log: bool = False) -> list[NewRun]:
    """Wave 1 recorded (baseline twice, the evidence run), the evidence run's HLO dump
    written where the toolkit puts it (or where its log's `--xla_dump_to` says): Wave 2."""
    spec = spec_of(catalog="extend", profiles=[])
    tmp_path.mkdir()
    rec = await recorder(store, tmp_path, spec)
    dump_to = tmp_path / "elsewhere" / "xla_dump"
    line = f"{IMAGE_LINE} --xla_dump_hlo_as_text --xla_dump_to={dump_to}" if in_log else None
    await rec.add(("baseline", params("baseline", wave="1")), tgs=1000.0)
    await rec.add(("evidence", params("evidence", wave="1")), tgs=950.0, xla_line=line,
                  dump=None if dump is None else hlo_text(dump, 2.1, 8, 80),
                  dump_to=dump_to if in_log else None)
    await rec.add(("baseline", params("baseline", wave="1")), tgs=1002.0)
    decision = adapter.plan(spec, await rec.context())
    assert isinstance(decision, list) and decision
    return decision


async def test_the_evidence_runs_hlo_dump_changes_the_order_of_wave_2(
        store: Store, tmp_path: Path) -> None:
    blind = await wave2_after_evidence(store, tmp_path / "a", None)
    # Without a dump: FSDP's own dominant costs first (all-gather: collective combining).
    reasons = {"without a dump": blind[0].reason}
    # The dump shows all-to-all dominating: transport (NCCL) flags go first, and the run
    # says which job's dump ordered it.
    a2a = {Cost.ALL_TO_ALL: 0.45, Cost.ALL_GATHER: 0.05, Cost.REDUCE_SCATTER: 0.02}
    seen = await wave2_after_evidence(store, tmp_path / "b", a2a)
    assert [n.label for n in seen] != [n.label for n in blind]
    reasons["all-to-all 45% in the dump"] = seen[0].reason
    check_golden_cases(GOLDEN / "xla_tuning_messages" / "wave2_first_reasons.txt", reasons)
    assert seen[0].params.env and not blind[0].params.env  # an NCCL env var, not a flag
    # The same dump where the log's `--xla_dump_to` put it orders the wave the same way.
    moved = await wave2_after_evidence(store, tmp_path / "c", a2a, in_log=True)
    assert [n.label for n in moved] == [n.label for n in seen]


def test_the_primary_tag_survives_the_stored_json() -> None:
    spec = spec_of(config_tags={"sparse": {"sparse_matmul": "true"}, "dense": {}})
    stored = json.loads(json.dumps(spec.model_dump(mode="json"), sort_keys=True))
    assert list(stored["config_tags"]) == ["dense", "sparse"]
    back = XlaTuningSpec.from_stored(stored)
    assert isinstance(back, XlaTuningSpec) and list(back.config_tags) == ["sparse", "dense"]
    assert back.inputs().tags == ("sparse", "dense")


async def test_queue_time_counts_a_wave_waiting_together_once(store: Store,
                                                             tmp_path: Path) -> None:
    """Jobs submitted together and run one after another: the sweep was queued for as long
    as the last one took, not for the sum of their waits (the 8 h timebox)."""
    rec = await recorder(store, tmp_path, spec_of())
    for p in ("a", "b", "c"):
        await rec.add((p, params(p)), tgs=1000.0)  # each submitted at 1000 s, ended at 1600 s
    jobs = await store.jobs.of_sweep(rec.sweep_id)
    shares = gather.queue_shares(jobs)
    assert sorted(shares.values()) == [0.0, 0.0, 600.0]
    results = gather.results(await store.runs.of_sweep(rec.sweep_id), jobs)
    assert sum(r.queue_s for r in results) == 600.0


async def test_queue_time_reads_the_simulated_clusters_clock_where_the_log_prints_it(
        store: Store, tmp_path: Path) -> None:
    """Issue 21 item 5: on the simulator each job's JOB SUMMARY prints when it ran on the
    cluster's own clock; the time rules read that, not when the engine noticed (here the
    engine's spans say 600 s for the three; the cluster's clock says 3 x 1 h one after
    another), and a job that never ran there (no line) holds no time."""
    rec = await recorder(store, tmp_path, spec_of())
    for i, p in enumerate(("a", "b", "c", "d")):
        ran = [cluster_line(3600.0 * i, 3600.0 * (i + 1))] if i < 3 else []
        await rec.add((p, params(p)), tgs=1000.0, extra=ran)
    jobs = sorted(await store.jobs.of_sweep(rec.sweep_id), key=lambda j: j.id)
    shares = gather.queue_time(jobs)
    assert [shares.get(j.id) for j in jobs] == [3600.0, 3600.0, 3600.0, None]
    results = gather.results(await store.runs.of_sweep(rec.sweep_id), jobs)
    assert sum(r.queue_s for r in results) == 3 * 3600.0
