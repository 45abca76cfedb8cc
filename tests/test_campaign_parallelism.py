"""A campaign's parallelism reaches its batch stage's jobs through model perf's own
`parallelism` field, and a campaign of several parallelisms runs node health once, then
batch, flags and confirm for each, its report and patch saying which parallelism each
result is for."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.daemon import open_parts
from sweepd.core.states import SweepState
from sweepd.kinds.api import Finished, StartSweep, SweepContext
from sweepd.kinds.campaign import confirm, hooks, report
from sweepd.kinds.campaign.gather import CampaignFacts, Cell, Child
from sweepd.kinds.campaign.plan import plan
from sweepd.kinds.campaign.plot import stage_figure
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.model_perf.exports import Optimum
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.node_perf.exports import NodeVerdicts
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import ClientOutput
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning.exports import Recipe
from sweepd.store.rows import Sweep
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.simrun import NODES, sim_config, write_scenario

NINE = [f"n{i}" for i in range(1, 10)]
PARS = ["FSDP=8", "PP=4,FSDP=2"]
FLAG = "--xla_gpu_all_gather_combine_threshold_bytes=1"


def _mp(**extra: Any) -> ModelPerfSpec:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": NODES, **extra})
    assert isinstance(spec, ModelPerfSpec)
    return spec


def test_model_perf_parallelism_is_validated_and_joins_the_overrides() -> None:
    spec = _mp(parallelism="pp=2, fsdp=4", overrides={"remat_policy": "full"})
    assert spec.parallelism == "PP=2,FSDP=4"
    assert spec.overrides == {"remat_policy": "full", "dcn_pipeline_parallelism": 2,
                              "dcn_fsdp_parallelism": 4}
    assert spec.needed_nodes == 8   # every job on every pinned node
    # The same spec stored and submitted again is the same spec (the axes already there).
    assert parse_spec(spec.model_dump(mode="json")) == spec
    assert spec.cluster_problem(8) is None
    check_golden(GOLDEN / "campaign" / "tp_per_node_refusal.txt",
                 f"{_mp(parallelism='TP=16,FSDP=8').cluster_problem(8)}\n")
    for bad, why in [({"parallelism": "FSDP=4"}, "make 4 nodes, not the 8 pinned"),
                     ({"parallelism": "DP=8"}, "is not AXIS=N"),
                     ({"parallelism": "FSDP=8", "overrides": {"dcn_fsdp_parallelism": 4}},
                      "contradicts parallelism FSDP=8"),
                     ({"parallelism": "FSDP=8", "min_nodes": 6}, "takes all 8 pinned")]:
        with pytest.raises(SpecError, match=why):
            _mp(**bad)


async def test_the_batch_stages_parallelism_reaches_its_job_on_the_simulated_cluster(
        tmp_path: Path) -> None:
    """The campaign's batch stage spec, submitted as it is: the job the simulated cluster
    received carries the parallelism's axes as MaxText overrides."""
    config = sim_config(tmp_path, write_scenario(tmp_path))
    spec = parse_spec({"kind": "campaign", "model": "llama2-70b", "parallelism": "PP=2,FSDP=4",
                       "nodes": NODES, "budget_hours": 4, "stages": ["batch", "confirm"]})
    assert isinstance(spec, CampaignSpec)
    got = plan(spec, SweepContext(runs=[], nodes=[], gpu_memory_gib=192,
                                  facts=CampaignFacts()))
    assert isinstance(got, StartSweep) and got.stage == "batch"
    stage = parse_spec(got.spec)
    async with open_parts(config) as parts:
        sid = await parts.store.sweeps.create(stage.kind, "batch",
                                                    stage.model_dump(mode="json"))
        for _ in range(50):
            await parts.engine.step()
            jobs = [j for j in await parts.store.jobs.of_sweep(sid) if j.backend_id]
            if jobs:
                break
        assert jobs, "the batch stage submitted no job"
        await parts.engine.backend.cancel(str(jobs[0].backend_id))
    record = json.loads((config.daemon.state_dir / "sim" / "jobs" /
                         f"{jobs[0].backend_id}.json").read_text())
    assert record["overrides"]["dcn_pipeline_parallelism"] == "2"
    assert record["overrides"]["dcn_fsdp_parallelism"] == "4"
    assert len(record["nodes"]) == 8


def _spec(**extra: Any) -> CampaignSpec:
    spec = parse_spec({"kind": "campaign", "model": "deepseek3-671b", "parallelism": PARS,
                       "nodes": "n[1-9]", "budget_hours": 12, **extra})
    assert isinstance(spec, CampaignSpec)
    return spec


def _ctx(facts: CampaignFacts) -> SweepContext[CampaignFacts]:
    return SweepContext(runs=[], nodes=NINE, gpu_memory_gib=288, facts=facts)


HEALTH = NodeVerdicts(2, 2000.0, {n: "degraded" if n == "n3" else "healthy" for n in NINE},
                      {n: -0.07 if n == "n3" else 0.0 for n in NINE})
RESULTS = {  # what each parallelism's stages find
    "FSDP=8": Cell(Optimum(3, 9, 1190.0),
                   Recipe(4, "proposal", "ag", (FLAG,), {}, 0.1, (0.08, 0.12), False,
                          1000.0, 1100.0),
                   confirm.measure([1000.0, 1004.0, 998.0], [1100.0, 1098.0, 1105.0])),
    "PP=4,FSDP=2": Cell(Optimum(6, 6, 1010.0), Recipe(7, "bounded", None),
                        confirm.measure([1000.0, 1002.0, 999.0], [1030.0, 1031.0, 1029.0])),
}


def _walk(spec: CampaignSpec) -> tuple[list[StartSweep], Finished]:
    """Run the state machine to its end, each stage's sweep done with RESULTS."""
    children: dict[str, Child] = {}
    cells: dict[str, Cell] = {}
    started: list[StartSweep] = []
    for _ in range(20):
        got = plan(spec, _ctx(CampaignFacts(children, HEALTH, cells)))
        if isinstance(got, Finished):
            return started, got
        assert isinstance(got, StartSweep), got
        started.append(got)
        parse_spec(got.spec)   # a spec the registry accepts (SpecError otherwise)
        children[got.stage] = Child(10 + len(children), got.stage, SweepState.DONE, "done")
        stage, par = spec.cell_of(got.stage)
        if par is not None:
            have, found = cells.get(par, Cell()), RESULTS[par]
            cells[par] = Cell(found.batch if stage == "batch" else have.batch,
                              found.flags if stage in ("flags",) else have.flags,
                              found.confirm if stage == "confirm" else have.confirm)
    raise AssertionError("the campaign never ended")


def test_several_parallelisms_share_node_health_then_run_their_own_stages() -> None:
    spec = _spec()
    started, done = _walk(spec)
    assert [s.stage for s in started] == [
        "health", "network", "batch FSDP=8", "flags FSDP=8", "confirm FSDP=8",
        "batch PP=4,FSDP=2", "flags PP=4,FSDP=2", "confirm PP=4,FSDP=2"]
    by = {s.stage: s.spec for s in started}
    # Each stage at its own parallelism, on the frozen nodes (the slow n3 left out).
    assert by["batch PP=4,FSDP=2"]["parallelism"] == "PP=4,FSDP=2"
    assert by["batch PP=4,FSDP=2"]["nodes"] == "n[1-2,4-9]"
    assert by["flags PP=4,FSDP=2"]["per_device_batch_size"] == 6   # its own batch, not 9
    assert by["flags FSDP=8"]["per_device_batch_size"] == 9
    # A bounded flags stage at PP: its candidate is its batch alone.
    assert by["confirm PP=4,FSDP=2"]["candidate"] == {"batch": 6}
    assert by["confirm FSDP=8"]["candidate"]["xla_flags"] == [FLAG]
    # The budget's per-parallelism stages share their part: batch 25 % of 12 h, halved.
    assert "ETA ~1.5 h" in started[2].progress[-1]
    # The next parallelism's start says the last one's end.
    check_golden(GOLDEN / "campaign" / "next_parallelism_start.txt",
                 "\n".join(started[5].progress) + "\n")
    cells = done.verdict["cells"]
    assert [c["parallelism"] for c in cells] == PARS
    assert [c["batch"]["best"] for c in cells] == [9, 6]
    assert "FSDP=8: batch 9" in done.summary and "PP=4,FSDP=2: batch 6" in done.summary


def _sweep(spec: CampaignSpec, verdict: dict[str, Any]) -> Sweep:
    return Sweep(id=1, kind="campaign", name="c", spec_json=json.dumps(
        spec.model_dump(mode="json")), state=SweepState.DONE, reason=None,
        verdict_json=json.dumps(verdict), created_at="", updated_at="")


def test_the_report_and_the_chart_say_which_parallelism_each_result_is_for() -> None:
    spec = _spec()
    _, done = _walk(spec)
    text = report.markdown(_sweep(spec, done.verdict), [], [])
    # The whole report: each stage's row and final line by parallelism, and the patch by
    # parallelism (one gpu.yml batch, the other noted; PP's bounded flags stage leaves no
    # recipe to write).
    check_golden(GOLDEN / "campaign" / "report_two_parallelisms.txt", text + "\n")
    labels = [b.label for b in report.bars_of(done.verdict)]
    # The chart's labels, one a line: each bar names its parallelism (PP's bounded flags
    # stage draws no bar).
    check_golden(GOLDEN / "campaign" / "chart_labels_two_parallelisms.txt",
                 "\n".join(labels) + "\n")


def test_the_chart_draws_each_stages_tgs_with_its_interval() -> None:
    """On the figure's artists: a bar per stage at its TGS, an error bar spanning its
    interval (none for the batch stage's one optimum)."""
    spec = _spec(parallelism="FSDP=8")
    conf = RESULTS["FSDP=8"].confirm
    assert conf is not None
    bars = report.bars_of({"cells": [{"parallelism": "FSDP=8", "batch": {"tgs": 1190.0},
                                      "flags": {"recipe_tgs": 1100.0, "baseline_tgs": 1000.0,
                                                "interval": [0.08, 0.12]},
                                      "confirmed": conf.as_dict()}]})
    fig = stage_figure(bars, f"{spec.model} campaign")
    (ax,) = fig.axes
    assert [p.get_height() for p in ax.patches] == pytest.approx([b.tgs for b in bars])
    assert [t.get_text() for t in ax.get_xticklabels()] == [b.label for b in bars]
    assert bars[2].interval == pytest.approx((1080.0, 1120.0))
    (caps_and_lines,) = [c for c in ax.containers if hasattr(c, "lines")]
    segments = caps_and_lines.lines[2][0].get_segments()
    spans = [(float(s[0][1]), float(s[1][1])) for s in segments]
    want = [b.interval or (b.tgs, b.tgs) for b in bars]
    assert spans == pytest.approx(want)
    assert spans[0][0] < bars[0].tgs < spans[0][1]   # the start's interval, not a point
    assert ax.get_ylabel() == "TGS/device"


def _io(said: list[str]) -> ClientOutput:
    def fail(args: argparse.Namespace, text: str) -> int:
        said.append(f"FAIL {text}")
        return 2
    return ClientOutput(fail=fail, say=lambda text, err=False: said.append(text),
                        print_json=lambda data: None)


def test_apply_guards_each_recipe_by_its_parallelism_and_notes_each_batch(
        tmp_path: Path) -> None:
    found = {"FSDP=8": RESULTS["FSDP=8"],
             "PP=8": Cell(Optimum(6, 6), Recipe(7, "proposal", "nch", (), {
                 "NCCL_NCHANNELS_PER_NET_PEER": "8"}, 0.03, (0.01, 0.05), False, 1.0, 1.03),
                 confirm.measure([1000.0, 1002.0, 999.0], [1030.0, 1031.0, 1029.0]))}
    spec = _spec(parallelism=["FSDP=8", "PP=8"])
    children = {k: Child(i, k, SweepState.DONE, "") for i, k in enumerate(
        ["health", "network", *(spec.key(s, p) for p in found for s in spec.stages[1:])])}
    done = plan(spec, _ctx(CampaignFacts(children, HEALTH, found)))
    assert isinstance(done, Finished)
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "deepseek3-671b.gpu.yml").write_text("per_device_batch_size: 7\n")
    said: list[str] = []
    args = argparse.Namespace(id=1, apply=tmp_path, json=False)
    assert hooks.apply(args, {"verdict": done.verdict}, _io(said)) == 0, said
    yml = (configs / "deepseek3-671b.gpu.yml").read_text()
    # One value in the YAML (the first parallelism's), the other's batch noted beside it.
    check_golden(GOLDEN / "campaign" / "applied_two_parallelisms.gpu.yml", yml)
    env = (configs / "deepseek3-671b.env.sh").read_text()
    # Each recipe in its own block, guarded by its own parallelism.
    fsdp, pp = env.index(FLAG), env.index("NCCL_NCHANNELS_PER_NET_PEER")
    assert "found at FSDP=8" in env[:fsdp] and "found at PP=8" in env[fsdp:pp]
    assert env.count("dcn_fsdp_parallelism") >= 1 and "dcn_pipeline_parallelism" in env
    assert subprocess.run(["bash", "-n", str(configs / "deepseek3-671b.env.sh")]).returncode == 0


def test_several_parallelisms_are_checked_at_submission() -> None:
    with pytest.raises(SpecError, match="names a parallelism twice"):
        _spec(parallelism=["FSDP=8", "fsdp=8"])
    with pytest.raises(SpecError, match="parallelism FSDP=16 takes 16 nodes"):
        _spec(parallelism=["FSDP=8", "FSDP=16"])
    with pytest.raises(SpecError, match="contradicts parallelism PP=4,FSDP=2"):
        _spec(overrides={"dcn_fsdp_parallelism": 8})
    with pytest.raises(SpecError, match=r"batch_stage\.parallelism: the campaign sets it"):
        _spec(batch_stage={"parallelism": "FSDP=8"})
    assert _spec().job_nodes == 8 and _spec().stage_hours()["flags PP=4,FSDP=2"] == 3.0


def test_the_stop_message_names_the_campaign_its_parallelism_and_the_stage() -> None:
    from sweepd.kinds.campaign.stop import stage_of, stop_state

    spec = _spec().model_dump(mode="json")
    sweep = Sweep(id=4, kind="campaign", name="c", spec_json=json.dumps(spec),
                  state=SweepState.AWAITING_DECISION,
                  reason="stage batch PP=4,FSDP=2 (sweep 9) stopped and asks: OOM",
                  verdict_json=None, created_at="", updated_at="")
    got = stop_state(sweep, [], [])
    assert got is not None
    reasons = ["stage health: only 7 healthy node(s) in the slot",
               "stage flags: its sweep's spec was refused: x", "resumed by a person"]
    assert [stage_of(r) for r in reasons] == ["health", "flags", None]
    alone = _spec(parallelism="FSDP=8", stages=["confirm"], candidate={"batch": 9})
    row = Sweep(id=5, kind="campaign", name="c", spec_json=json.dumps(alone.model_dump(
        mode="json")), state=SweepState.AWAITING_DECISION, reason="node fault",
        verdict_json=None, created_at="", updated_at="")
    title = stop_state(row, [], [])
    assert title is not None
    check_golden_cases(GOLDEN / "campaign" / "stop_titles.txt", {
        "a stage of two parallelisms": got[0], "a campaign of one stage": title[0]})


async def test_gather_reads_each_parallelisms_stages_into_its_own_cell(store: Any) -> None:
    from sweepd.kinds.campaign.gather import gather
    from sweepd.kinds.registry import GatherContext
    from sweepd.store.campaigns import Carried

    spec = _spec(stages=["batch", "flags", "confirm"])
    parent = await store.sweeps.create("campaign", "c", spec.model_dump(mode="json"))
    for key, best in (("batch FSDP=8", 9), ("batch PP=4,FSDP=2", 6)):
        child, _ = await store.campaigns.start_child(parent, Carried(key), "model-perf", key, {},
                                                     None)
        await store.sweeps.transition(child, SweepState.RUNNING, "started")
        await store.sweeps.transition(child, SweepState.DONE, "verdict",
                                            verdict={"best": best, "tgs": 1000.0 + best})
    facts = await gather(store, spec, GatherContext(sweep=parent))
    assert set(facts.children) == {"batch FSDP=8", "batch PP=4,FSDP=2"}
    assert {p: c.batch.best for p, c in facts.cells.items() if c.batch} == {
        "FSDP=8": 9, "PP=4,FSDP=2": 6}
    got = plan(spec, _ctx(facts))   # each flags stage at its own parallelism's batch
    assert isinstance(got, StartSweep) and got.stage == "flags FSDP=8"
    assert got.spec["per_device_batch_size"] == 9
