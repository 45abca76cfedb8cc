"""The campaign's state machine (pure) over its stages' typed results, its spec's rules,
the confirm stage's interleaving and claim, and the store's campaign tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import Finished, NewRun, StartSweep, Stop, SweepContext
from sweepd.kinds.campaign import confirm
from sweepd.kinds.campaign.confirm import Confirmed
from sweepd.kinds.campaign.gather import CampaignFacts, Cell, Child
from sweepd.kinds.campaign.plan import plan
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.model_perf.exports import Optimum
from sweepd.kinds.node_perf.exports import NodeVerdicts
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.kinds.xla_tuning.exports import Recipe
from sweepd.store.campaigns import Carried
from sweepd.store.rows import Run, RunParams
from sweepd.store.store import Store
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed

SLOT = "n[1-9]"
NINE = [f"n{i}" for i in range(1, 10)]


def _spec(**extra: Any) -> CampaignSpec:
    spec = parse_spec({"kind": "campaign", "model": "deepseek3-671b", "parallelism": "FSDP=8",
                       "nodes": SLOT, "budget_hours": 10, **extra})
    assert isinstance(spec, CampaignSpec)
    return spec


def _facts(children: dict[str, Child] | None = None, *, health: NodeVerdicts | None = None,
           batch: Optimum | None = None, flags: Recipe | None = None,
           confirm: Confirmed | None = None, par: str = "FSDP=8",
           **rest: Any) -> CampaignFacts:
    """Facts of a campaign of one parallelism (`par`): its batch, flags and confirm results."""
    cells = {par: Cell(batch, flags, confirm)} if batch or flags or confirm else {}
    return CampaignFacts(children or {}, health=health, cells=cells, **rest)


def _ctx(facts: CampaignFacts, runs: list[Run] | None = None,
         acknowledged: tuple[str, ...] = ()) -> SweepContext[CampaignFacts]:
    return SweepContext(runs=runs or [], nodes=NINE[:8], gpu_memory_gib=288, facts=facts,
                        acknowledged_stops=acknowledged)


IDS = {"health": 2, "batch": 3, "flags": 4, "confirm": 5, "network": 6}


def _done(*stages: str) -> dict[str, Child]:
    """These stages' sweeps done (node health's network check with it)."""
    named = [*stages, *(["network"] if "health" in stages else [])]
    return {s: Child(IDS[s], s, SweepState.DONE, "done") for s in named}


def _health(*slow: str) -> NodeVerdicts:
    status = {n: "degraded" if n in slow else "healthy" for n in NINE}
    return NodeVerdicts(2, 2000.0, status, {n: -0.07 if n in slow else 0.0 for n in NINE})


RECIPE = Recipe(4, "proposal", "ag1G", ("--xla_gpu_all_gather_combine_threshold_bytes=1",),
                {}, 0.1, (0.08, 0.12), False, 1000.0, 1100.0)


def test_the_first_stage_is_node_health_on_every_slot_node_with_the_budget_split() -> None:
    got = plan(_spec(), _ctx(CampaignFacts()))
    assert isinstance(got, StartSweep) and got.stage == "health"
    assert got.spec["kind"] == "node-perf" and got.spec["nodes"] == SLOT
    # The kickoff names every stage's share of the 10 h budget, then this stage's ETA.
    check_golden(GOLDEN / "campaign" / "kickoff.txt", "\n".join(got.progress) + "\n")


def test_a_slow_node_is_left_out_and_a_spare_takes_its_place_for_every_later_stage() -> None:
    facts = _facts(_done("health"), health=_health("n3"))
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep) and got.stage == "batch"
    assert got.spec["kind"] == "model-perf"
    assert got.spec["nodes"] == "n[1-2,4-9]" and got.nodes == "n[1-2,4-9]"
    # The parallelism goes to model perf's own field, which passes its axes as overrides
    # and runs every job on all the frozen nodes.
    assert got.spec["parallelism"] == "FSDP=8" and "min_nodes" not in got.spec
    batch = parse_spec(got.spec)
    assert batch.overrides["dcn_fsdp_parallelism"] == 8 and batch.needed_nodes == 8


def test_the_batch_found_feeds_the_flags_stage_and_both_feed_confirm() -> None:
    facts = _facts(_done("health", "batch"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0))
    flags = plan(_spec(), _ctx(facts))
    assert isinstance(flags, StartSweep) and flags.stage == "flags"
    assert flags.spec["per_device_batch_size"] == 9 and flags.batch == 9
    assert flags.spec["parallelism"] == "FSDP=8" and flags.spec["nodes"] == "n[1-2,4-9]"
    facts = _facts(_done("health", "batch", "flags"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0), flags=RECIPE)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep) and got.stage == "confirm"
    assert got.spec["kind"] == "campaign" and got.spec["stages"] == ["confirm"]
    assert got.spec["candidate"] == {"batch": 9, "xla_flags": list(RECIPE.xla_flags),
                                     "env": {}}
    assert got.recipe == list(RECIPE.xla_flags)
    # What the campaign hands on is a spec the registry accepts, as a person's would be.
    assert isinstance(parse_spec(got.spec), CampaignSpec)


def test_a_bounded_flags_stage_is_a_result_without_a_recipe_not_a_stop() -> None:
    bounded = Recipe(4, "bounded", None)
    facts = _facts(_done("health", "batch", "flags"), health=_health(),
                          batch=Optimum(3, 9), flags=bounded)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep) and got.spec["candidate"] == {"batch": 9}
    assert got.recipe is None


def test_too_few_healthy_nodes_stop_the_campaign_and_ask() -> None:
    facts = _facts(_done("health"), health=_health("n3", "n7"))
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Stop) and got.rule == "campaign.too_few_nodes"
    assert "only 7 healthy node(s)" in got.reason and "n3: degraded" in (got.evidence or "")


def test_a_stage_that_stops_and_asks_stops_the_campaign_once() -> None:
    children = {**_done("health"),
                "batch": Child(3, "batch", SweepState.AWAITING_DECISION, "OOM everywhere")}
    facts = _facts(children, health=_health())
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Stop) and got.rule == "campaign.stage_stopped.3"
    assert "OOM everywhere" in got.reason and "abort it to skip the stage" in got.reason
    # Resumed by a person: the campaign waits for the stage's sweep, no second stop.
    assert plan(_spec(), _ctx(facts, acknowledged=("campaign.stage_stopped.3",))) == []


def test_a_running_stage_is_waited_for_and_an_aborted_one_is_skipped() -> None:
    running = {**_done("health"), "batch": Child(3, "batch", SweepState.RUNNING, None)}
    assert plan(_spec(), _ctx(_facts(running, health=_health()))) == []
    skipped = {**_done("health"), "batch": Child(3, "batch", SweepState.ABORTED, "by hand")}
    got = plan(_spec(), _ctx(_facts(skipped, health=_health())))
    assert isinstance(got, StartSweep) and got.stage == "flags"
    assert "per_device_batch_size" not in got.spec   # no batch found: the config's


def test_every_stage_done_ends_the_campaign_with_each_result() -> None:
    conf = confirm.measure([1000.0, 1004.0, 998.0], [1100.0, 1098.0, 1105.0])
    facts = _facts(_done("health", "batch", "flags", "confirm"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0), flags=RECIPE, confirm=conf)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Finished) and got.ok
    excluded = got.verdict["health"]["excluded"]
    assert list(excluded) == ["n3"]
    check_golden(GOLDEN / "campaign" / "excluded_evidence.txt", f"{excluded['n3']}\n")
    (cell,) = got.verdict["cells"]
    assert cell["parallelism"] == "FSDP=8" and cell["nodes"] == "n[1-2,4-9]"
    assert cell["batch"]["best"] == 9
    assert cell["confirmed"]["claim"].startswith("confirmed gain +")
    assert got.verdict["sweeps"] == {"health": 2, "network": 6, "batch": 3, "flags": 4,
                                     "confirm": 5}


def test_stages_are_data_a_dropped_stage_is_not_run_and_the_order_is_kept() -> None:
    spec = _spec(stages=["batch", "confirm"])
    got = plan(spec, _ctx(CampaignFacts()))
    assert isinstance(got, StartSweep) and got.stage == "batch"
    assert got.spec["nodes"] == "n[1-8]"   # no health stage: the slot's first nodes
    with pytest.raises(SpecError, match="keep the seeds' order"):
        _spec(stages=["flags", "batch"])
    with pytest.raises(SpecError, match="needs a candidate"):
        _spec(stages=["confirm"])
    with pytest.raises(SpecError, match="takes 8 nodes; the slot has 4"):
        _spec(nodes="n[1-4]")


def _run(seq: int, label: str, tgs: float | None, state: str = RunState.PASSED) -> Run:
    return Run(id=seq, sweep_id=9, seq=seq, label=label, params_json=RunParams().to_json(),
               nodes="n[1-8]", state=RunState(state), outcome=None, tgs=tgs, mfu=None,
               failure_class=None, detail=None, not_before=None)


def test_confirm_interleaves_baseline_and_candidate_one_at_a_time() -> None:
    spec = _spec(stages=["confirm"], candidate={"batch": 9, "xla_flags": ["--xla_a=1"]})
    runs: list[Run] = []
    labels = []
    for i in range(6):
        got = plan(spec, _ctx(CampaignFacts(), runs))
        assert isinstance(got, list) and len(got) == 1
        new = got[0]
        assert isinstance(new, NewRun)
        labels.append(new.label)
        if new.label.startswith("B"):
            assert new.params.overrides["per_device_batch_size"] == 9
            assert new.params.xla_flags == ["--xla_a=1"] and new.params.profile
        else:
            assert "per_device_batch_size" not in new.params.overrides
            assert new.params.xla_flags == []
        # While a run is open the next waits: A and B alternate in time.
        open_run = _run(i + 1, new.label, None, RunState.ACTIVE)
        assert plan(spec, _ctx(CampaignFacts(), [*runs, open_run])) == []
        runs.append(_run(i + 1, new.label, 1000.0 + i if new.label[0] == "A" else 1100.0 + i))
    assert labels == ["A1", "B1", "A2", "B2", "A3", "B3"]
    done = plan(spec, _ctx(CampaignFacts(), runs))
    assert isinstance(done, Finished)
    # A: 1000, 1002, 1004; B: 1101, 1103, 1105
    assert done.verdict["confirmed"]["gain"] == pytest.approx(1103 / 1002 - 1)


def test_a_failed_confirm_run_is_run_again_in_its_arm() -> None:
    spec = _spec(stages=["confirm"], candidate={"batch": 12})
    runs = [_run(1, "A1", 1000.0), _run(2, "B1", None, RunState.FAILED)]
    got = plan(spec, _ctx(CampaignFacts(), runs))
    assert isinstance(got, list) and got[0].label == "A2"
    runs += [_run(3, "A2", 1000.0), _run(4, "B2", 1100.0), _run(5, "A3", 1001.0)]
    got = plan(spec, _ctx(CampaignFacts(), runs))
    assert isinstance(got, list) and got[0].label == "B3"


def test_the_claim_interval_is_wide_with_few_runs_and_says_within_noise() -> None:
    noisy = confirm.measure([1000.0, 1030.0, 970.0], [1010.0, 1040.0, 980.0])
    assert noisy.interval is not None and noisy.interval[0] < 0 < noisy.interval[1]
    assert noisy.claim.startswith("within noise")
    clear = confirm.measure([1000.0, 1001.0, 999.0], [1100.0, 1101.0, 1099.0])
    assert clear.interval is not None and clear.interval[0] > 0.09
    assert clear.claim.startswith("confirmed gain +10.00%")


async def test_a_stage_sweep_is_made_once_with_its_link_and_the_campaign_row(
        store: Store, tmp_path: Path) -> None:
    parent = await store.sweeps.create("campaign", "c", {"model": "m"})
    spec = {"kind": "node-perf", "nodes": SLOT}
    child, made = await store.campaigns.start_child(parent, Carried("health"), "node-perf", "h",
                                                    spec, "alice")
    again, made_again = await store.campaigns.start_child(parent, Carried("health"), "node-perf",
                                                          "h", spec, "alice")
    assert made and not made_again and again == child
    assert len(await store.sweeps.all()) == 2
    link = await store.campaigns.parent_of(child)
    assert link is not None and (link.campaign_id, link.stage) == (parent, "health")
    assert (await store.sweeps.get(child)).submitted_by == "alice"
    batch, _ = await store.campaigns.start_child(
        parent, Carried("batch", nodes="n[1-8]", batch=None), "model-perf", "b", spec, None)
    await store.campaigns.start_child(parent, Carried("flags", batch=9, recipe=["--a=1"]),
                                      "xla-tuning", "f", spec, None)
    row = await store.campaigns.get(parent)
    assert row is not None and (row.stage, row.nodes, row.batch, row.recipe) == (
        "flags", "n[1-8]", 9, ["--a=1"])
    assert [c.stage for c in await store.campaigns.children(parent)] == [
        "health", "batch", "flags"]
    assert batch in {c.child_id for c in await store.campaigns.children(parent)}


async def test_a_campaign_is_due_when_its_latest_stage_ends_or_stops_to_ask(
        store: Store) -> None:
    parent = await store.sweeps.create("campaign", "c", {})
    await store.sweeps.transition(parent, SweepState.RUNNING, "started")
    child, _ = await store.campaigns.start_child(parent, Carried("health"), "node-perf", "h", {},
                                                 None)
    assert await store.campaigns.due() == set()          # queued: nothing to do
    await store.sweeps.transition(child, SweepState.RUNNING, "started")
    assert await store.campaigns.due() == set()
    await store.sweeps.transition(child, SweepState.AWAITING_DECISION, "asks")
    assert await store.campaigns.due() == {parent}       # the campaign must stop too
    await store.sweeps.transition(parent, SweepState.AWAITING_DECISION, "stage asks")
    assert await store.campaigns.due() == set()          # not running
    await store.sweeps.transition(parent, SweepState.RUNNING, "resumed by a person")
    assert await store.campaigns.due() == set()          # answered: waits for the stage
    await store.sweeps.transition(child, SweepState.RUNNING, "resumed")
    await store.sweeps.transition(child, SweepState.DONE, "verdict")
    assert await store.campaigns.due() == {parent}


def test_each_stage_end_is_said_before_the_next_starts() -> None:
    from sweepd.kinds.network.exports import NetworkVerdict

    facts = _facts(_done("health"), health=_health("n3"),
                          network=NetworkVerdict(6, {}, "no network issue"))
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep)
    ends = {"network": got.progress[0]}
    facts = _facts(_done("health", "batch", "flags"), health=_health(),
                          batch=Optimum(3, 9), flags=RECIPE)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep)
    ends["flags"] = got.progress[0]
    check_golden_cases(GOLDEN / "campaign" / "stage_ends.txt", ends)


def test_a_spent_budget_ends_the_campaign_with_what_it_has_stated_as_such() -> None:
    facts = _facts(_done("health", "batch"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0), spent_hours=10.5)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Finished) and got.ok and got.verdict["budget_spent"]
    assert got.verdict["cells"][0]["batch"]["best"] == 9
    check_golden(GOLDEN / "campaign" / "budget_spent_summary.txt", got.summary + "\n")
    # Within the budget the next stage starts, and says what is left of it.
    got = plan(_spec(), _ctx(replace(facts, spent_hours=4.0)))
    assert isinstance(got, StartSweep) and "6.0 h of the budget left" in got.progress[-1]


def _sweep(spec: dict[str, Any], verdict: dict[str, Any] | None) -> Any:
    import json

    from sweepd.store.rows import Sweep
    return Sweep(id=1, kind="campaign", name="c", spec_json=json.dumps(spec),
                 state=SweepState.DONE, reason=None,
                 verdict_json=json.dumps(verdict) if verdict else None,
                 created_at="", updated_at="")


def _finished_campaign() -> tuple[Finished, Any]:
    """A campaign whose four stages ended, confirmed: its verdict and its sweep row."""
    conf = confirm.measure([1000.0, 1004.0, 998.0], [1100.0, 1098.0, 1105.0])
    facts = _facts(_done("health", "batch", "flags", "confirm"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0), flags=RECIPE, confirm=conf)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Finished)
    return got, _sweep(_spec().model_dump(mode="json"), got.verdict)


def test_the_report_names_each_stage_its_sweep_and_the_final_claim_and_draws_them() -> None:
    from sweepd.kinds.campaign import report

    got, sweep = _finished_campaign()
    text = report.markdown(sweep, [], [])
    # Each stage's sweep and result, the final claim with its interval: as a person reads it.
    check_golden(GOLDEN / "campaign" / "report.txt", text)
    # TGS per stage with intervals: start, batch, flags, confirmed.
    assert [b.label for b in report.bars_of(got.verdict)] == [
        "start (baseline-deployed)", "batch stage", "flags stage", "confirmed candidate"]
    assert [b.interval is not None for b in report.bars_of(got.verdict)] == [
        True, False, True, True]
    png = report.plot(sweep, [], [])
    assert png is not None and png.startswith(b"\x89PNG")


def _io(said: list[str]) -> Any:
    import argparse

    from sweepd.kinds.registry import ClientOutput

    def fail(args: argparse.Namespace, text: str) -> int:
        said.append(f"FAIL {text}")
        return 2
    return ClientOutput(fail=fail, say=lambda text, err=False: said.append(text),
                        print_json=lambda data: None)


def test_apply_writes_the_confirmed_batch_and_recipe_into_the_checkout(tmp_path: Path) -> None:
    import argparse
    import subprocess

    from sweepd.kinds.campaign import hooks

    configs = tmp_path / "repo" / "configs"
    configs.mkdir(parents=True)
    (configs / "deepseek3-671b.gpu.yml").write_text("model_name: deepseek3-671b\n"
                                                    "per_device_batch_size: 7\n")
    conf = confirm.measure([1000.0, 1004.0, 998.0], [1100.0, 1098.0, 1105.0])
    facts = _facts(_done("health", "batch", "flags", "confirm"), health=_health("n3"),
                          batch=Optimum(3, 9, 1190.0), flags=RECIPE, confirm=conf)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Finished)
    said: list[str] = []
    args = argparse.Namespace(id=1, apply=tmp_path / "repo", json=False)
    assert hooks.apply(args, {"verdict": got.verdict}, _io(said)) == 0, said
    yml = (configs / "deepseek3-671b.gpu.yml").read_text()
    # The batch, with the parallelism it was found at (YAML cannot guard it).
    check_golden(GOLDEN / "campaign" / "applied.gpu.yml", yml)
    env = (configs / "deepseek3-671b.env.sh").read_text()
    assert RECIPE.xla_flags[0] in env and "dcn_fsdp_parallelism" in env   # guarded
    assert subprocess.run(["bash", "-n", str(configs / "deepseek3-671b.env.sh")]).returncode == 0
    # Nothing within noise is put forward.
    within = confirm.measure([1000.0, 1030.0, 970.0], [1010.0, 1040.0, 980.0]).as_dict()
    noisy = {**got.verdict, "cells": [{**got.verdict["cells"][0], "confirmed": within}]}
    said.clear()
    assert hooks.apply(args, {"verdict": noisy}, _io(said)) == 2
    check_golden(GOLDEN / "campaign" / "apply_within_noise.txt", "\n".join(said) + "\n")


def test_with_nothing_found_to_change_the_campaign_ends_without_a_confirm_stage() -> None:
    bounded = Recipe(4, "bounded", None)
    skipped = {**_done("health", "flags"),
               "batch": Child(3, "batch", SweepState.ABORTED, "skipped by a person")}
    got = plan(_spec(), _ctx(_facts(skipped, health=_health(), flags=bounded)))
    assert isinstance(got, Finished) and got.ok
    check_golden(GOLDEN / "campaign" / "nothing_to_confirm_summary.txt", got.summary + "\n")
    assert got.verdict["skipped"] == ["batch"]


def test_node_health_checks_the_network_on_the_nodes_node_perf_kept() -> None:
    from sweepd.kinds.network.exports import NetworkVerdict

    facts = _facts({"health": Child(2, "health", SweepState.DONE, "done")},
                          health=_health("n3"))
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, StartSweep) and got.stage == "network"
    check_golden(GOLDEN / "campaign" / "health_ended_progress.txt", f"{got.progress[0]}\n")
    assert got.spec["kind"] == "network" and got.spec["nodes"] == "n[1-2,4-9]"
    assert got.spec["node_perf_sweep"] == 2 and got.spec["model"] == "llama2-70b"
    # A node the network check excludes is left out too; one more and too few are left.
    net = NetworkVerdict(6, {"n9": "bad node n9 (its NIC)"})
    facts = _facts(_done("health"), health=_health("n3"), network=net)
    got = plan(_spec(), _ctx(facts))
    assert isinstance(got, Stop) and got.rule == "campaign.too_few_nodes"
    check_golden(GOLDEN / "campaign" / "too_few_nodes_evidence.txt", f"{got.evidence}\n")
    ten = NodeVerdicts(2, 2000.0, {**_health("n3").status, "n10": "healthy"}, {})
    got = plan(_spec(nodes="n[1-10]"), _ctx(_facts(facts.children, health=ten,
                                                          network=net)))
    assert isinstance(got, StartSweep) and got.stage == "batch"
    assert got.spec["nodes"] == "n[1-2,4-8,10]"
    # A one-node job has no network to check.
    one = _spec(parallelism="TP=8", nodes="n[1-4]")
    got = plan(one, _ctx(_facts({"health": Child(2, "health", SweepState.DONE, "")},
                                       health=_health())))
    assert isinstance(got, StartSweep) and got.stage == "batch"


async def test_aborting_a_campaign_aborts_its_stage_under_way(tmp_path: Path) -> None:
    from sweepd.app.service import Service
    from sweepd.clusters.factory import make_backend
    from sweepd.config import load_config
    from sweepd.core.engine import Engine

    config = load_config(None, {"daemon.state_dir": str(tmp_path)})
    store = await Store.open(tmp_path / "db.sqlite")
    backend, clock = make_backend(config)
    try:
        service = Service(Engine(store, backend, clock, config))
        parent = await store.sweeps.create("campaign", "c", {"model": "m"})
        await store.sweeps.transition(parent, SweepState.RUNNING, "started")
        done, _ = await store.campaigns.start_child(parent, Carried("health"), "node-perf", "h",
                                                    {}, None)
        await store.sweeps.transition(done, SweepState.RUNNING, "started")
        await store.sweeps.transition(done, SweepState.DONE, "verdict")
        running, _ = await store.campaigns.start_child(parent, Carried("batch"), "model-perf", "b",
                                                       {}, None)
        await store.sweeps.transition(running, SweepState.RUNNING, "started")
        await service.abort(parent)
        assert (await store.sweeps.get(parent)).state == SweepState.ABORTED
        stage = await store.sweeps.get(running)
        assert stage.state == SweepState.ABORTED
        check_golden(GOLDEN / "campaign" / "stage_aborted_with_its_campaign.txt",
                     scrubbed(f"{stage.reason}\n", campaign=f"sweep {parent}"))
        assert (await store.sweeps.get(done)).state == SweepState.DONE   # an ended stage stays
    finally:
        await backend.close()
        await store.close()


async def test_a_stage_spec_the_registry_refuses_stops_the_campaign_with_the_refusal(
        tmp_path: Path) -> None:
    from sweepd.clusters.factory import make_backend
    from sweepd.config import load_config
    from sweepd.core.children import start_child
    from sweepd.core.engine import Engine

    config = load_config(None, {"daemon.state_dir": str(tmp_path)})
    store = await Store.open(tmp_path / "db.sqlite")
    backend, clock = make_backend(config)
    try:
        engine = Engine(store, backend, clock, config)
        spec = _spec().model_dump(mode="json")
        parent = await store.sweeps.create("campaign", "c", spec)
        await store.sweeps.transition(parent, SweepState.RUNNING, "started")
        bad = StartSweep("batch", {"kind": "model-perf", "model": "deepseek3-671b",
                                   "nodes": "n[1-8]", "upper": 0})
        assert await start_child(engine, await store.sweeps.get(parent), bad) is None
        stopped = await store.sweeps.get(parent)
        assert stopped.state == SweepState.AWAITING_DECISION
        check_golden(GOLDEN / "campaign" / "stage_spec_refused.txt", f"{stopped.reason}\n")
        assert len(await store.sweeps.all()) == 1   # nothing half made
        refused = [e for e in await store.events.of_sweep(parent)
                   if e.rule == "campaign.stage_refused"]
        assert len(refused) == 1 and "upper" in (refused[0].evidence or "")
        assert refused[0].to_state == SweepState.AWAITING_DECISION
        good = StartSweep("health", {"kind": "node-perf", "nodes": "n[1-9]"},
                          progress=["stage health: starting"])
        await store.sweeps.transition(parent, SweepState.RUNNING, "resumed")
        child = await start_child(engine, await store.sweeps.get(parent), good)
        again = await start_child(engine, await store.sweeps.get(parent), good)
        assert child is not None and again == child   # planned twice, made once
        said = [e.reason for e in await store.events.of_sweep(parent, kind="progress")]
        assert said.count("stage health: starting") == 1
        # The stage's start is recorded on the campaign and its link on the stage, once.
        started = [e.reason for e in await store.events.of_sweep(parent)
                   if e.rule == "campaign.stage_started"]
        linked = [e.reason for e in await store.events.of_sweep(child)
                  if e.rule == "campaign.child"]
        assert started == [f"stage health: sweep {child} started"]
        assert linked == [f"stage health of campaign {parent}"]
    finally:
        await backend.close()
        await store.close()


def test_tuning_md_writes_the_campaign_report_file(tmp_path: Path) -> None:
    import argparse

    from sweepd.kinds.campaign import hooks

    got, sweep = _finished_campaign()
    report = {"sweep": {"spec": sweep.spec}, "verdict": got.verdict,
              **hooks.report_extras(sweep, [], [], None)}
    said: list[str] = []
    args = argparse.Namespace(id=1, apply=None, tuning_md=tmp_path, json=False)
    assert hooks.run(args, report, _io(said)) == 0, said
    text = (tmp_path / "deepseek3-671b-campaign.md").read_text()
    assert text.startswith("## deepseek3-671b-campaign.md") and "**Final: confirmed gain" in text


def test_list_names_a_stage_sweeps_campaign() -> None:
    from sweepd.cli.listing import _list_row

    progress = {"runs_done": 3, "runs_most": 12, "ended": False, "jobs_queued": 0,
                "jobs_running": 1, "eta_s": None, "eta_guess": False, "elapsed_s": 60}
    row = _list_row({"name": "c: batch", "campaign": {"id": 1, "stage": "batch"},
                     "progress": progress})
    assert row["name"] == "c: batch [campaign 1: batch]"
    assert _list_row({"name": "alone", "campaign": None, "progress": progress})["name"] == \
        "alone"


async def test_a_resume_in_the_same_millisecond_as_the_stop_is_still_an_answer(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every transition at one instant (a fast machine): the order of the transitions, not
    their timestamps, says whether the stage stopped after the campaign was resumed."""
    import sweepd.store.sweeps as sweeps_module

    monkeypatch.setattr(sweeps_module, "now_sql", lambda: "2026-12-02T10:00:00.000Z")
    parent = await store.sweeps.create("campaign", "c", {})
    await store.sweeps.transition(parent, SweepState.RUNNING, "started")
    child, _ = await store.campaigns.start_child(parent, Carried("health"), "node-perf", "h", {},
                                                 None)
    await store.sweeps.transition(child, SweepState.RUNNING, "started")
    await store.sweeps.transition(child, SweepState.AWAITING_DECISION, "asks")
    assert await store.campaigns.due() == {parent}
    await store.sweeps.transition(parent, SweepState.AWAITING_DECISION, "stage asks")
    await store.sweeps.transition(parent, SweepState.RUNNING, "resumed by a person")
    assert await store.campaigns.due() == set()
    await store.sweeps.transition(child, SweepState.RUNNING, "resumed")
    await store.sweeps.transition(child, SweepState.AWAITING_DECISION, "asks again")
    assert await store.campaigns.due() == {parent}


async def test_a_later_stage_spec_not_yet_made_is_recorded_at_submission(
        tmp_path: Path) -> None:
    """The flags stage's spec is made from the batch stage's result: at submission it is
    made without it, and what refuses it now is recorded as the campaign's pre-flight
    (`preflight.stage_spec`), to be checked again when the stage starts."""
    from sweepd.app.daemon import open_parts
    from sweepd.kinds.campaign.rules import STAGE_SPEC
    from tests.simrun import NODES, sim_config, write_scenario

    config = sim_config(tmp_path, write_scenario(tmp_path))
    async with open_parts(config) as parts:
        sweep_id = int((await parts.service.submit({
            "kind": "campaign", "model": "llama2-70b", "parallelism": "FSDP=8",
            "nodes": NODES, "budget_hours": 10,
            "flags_stage": {"thresholds": {"win": 5}}}))["id"])
        [check] = [e for e in await parts.store.events.of_sweep(sweep_id)
                   if e.rule == STAGE_SPEC.id]
        assert check.kind == "decision"
        check_golden_cases(GOLDEN / "campaign" / "stage_spec_checked_at_submit.txt",
                           {"reason": check.reason, "evidence": f"{check.evidence}"})
