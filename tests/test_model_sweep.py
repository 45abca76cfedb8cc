"""Model sweep: planning and evaluation (pure), and whole sweeps on the simulated cluster."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.core.states import JOB_ACTIVE, RunState, SweepState
from sweepd.kinds.api import Finished, GatherError, NewRun, Stop, SweepContext
from sweepd.kinds.model_sweep.compare import Column, evaluate, judge
from sweepd.kinds.model_sweep.kind import gather
from sweepd.kinds.model_sweep.matrix import node_layout
from sweepd.kinds.model_sweep.plan import ALL_FAIL_RULE, FAIL_FAST_RULE, SweepFacts, plan
from sweepd.kinds.model_sweep.report import _commit, evaluation
from sweepd.kinds.model_sweep.spec import ModelSweepSpec
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError
from sweepd.store.rows import Run, RunParams
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.simrun import NODES, open_store, run, sim_config, write_scenario

PINNED = expand_nodes(NODES)
SMALL = {"llama2-70b": [1, 2], "mixtral-8x22b": [4], "grok-1": [8]}


def spec(**extra: Any) -> ModelSweepSpec:
    return cast(ModelSweepSpec, parse_spec({"kind": "model-sweep", "nodes": NODES, **extra}))


def ctx(runs: list[Run] | None = None, facts: SweepFacts | None = None,
        acknowledged_stops: Sequence[str] = ()) -> SweepContext[SweepFacts]:
    return SweepContext(runs=runs or [], nodes=PINNED, gpu_memory_gib=192,
                        facts=facts or SweepFacts(), acknowledged_stops=acknowledged_stops)


def as_runs(new: list[NewRun], results: dict[str, tuple[str, float | None]]) -> list[Run]:
    """Rows for planned runs; `results` maps a label to (outcome, tgs); others still active."""
    out = []
    for i, n in enumerate(new, 1):
        outcome, tgs = results.get(n.label, (None, None))
        state = (RunState.ACTIVE if outcome is None else
                 RunState.PASSED if outcome == "pass" else RunState.FAILED)
        out.append(Run(id=i, sweep_id=1, seq=i, label=n.label, params_json=n.params.to_json(),
                       nodes=",".join(n.nodes), state=state, outcome=outcome, tgs=tgs, mfu=None,
                       failure_class=None if outcome in (None, "pass") else outcome,
                       detail=None, not_before=None))
    return out


# -- pure -------------------------------------------------------------------------------

def test_default_matrix_is_ten_jobs_per_commit_on_the_skill_layout() -> None:
    s = spec()
    assert s.commits == ["HEAD"] and s.needed_nodes == 8
    new = plan(s, ctx())
    assert isinstance(new, list) and len(new) == 10
    by_label = {n.label: n for n in new}
    assert list(by_label["llama2-70b 1N @HEAD"].nodes) == PINNED[:1]
    assert list(by_label["llama2-70b 2N @HEAD"].nodes) == PINNED[2:4]
    assert list(by_label["mixtral-8x22b 4N @HEAD"].nodes) == PINNED[4:8]
    assert all(list(n.nodes) == PINNED for n in new if " 8N " in n.label)
    # Sub-full jobs are submitted first so they start together; 8N ones queue behind.
    assert [len(n.nodes) for n in new][:3] == [1, 2, 4]
    assert new[0].params == RunParams(model="llama2-70b", commit="HEAD", tag="HEAD",
                                      overrides={"steps": 15, "dataset_type": "synthetic"})


def test_two_commits_interleave_so_pairs_land_early() -> None:
    new = plan(spec(commits=["main", "feat/x"], matrix=SMALL), ctx())
    assert isinstance(new, list)
    assert [n.label for n in new] == [
        "llama2-70b 1N @main", "llama2-70b 1N @feat-x", "llama2-70b 2N @main",
        "llama2-70b 2N @feat-x", "mixtral-8x22b 4N @main", "mixtral-8x22b 4N @feat-x",
        "grok-1 8N @main", "grok-1 8N @feat-x"]
    assert new[1].params.commit == "feat/x"


@pytest.mark.parametrize("bad", [
    {"matrix": {"ds-proxy-1": [1]}},
    {"matrix": {"grok-1": [4]}},                  # below the model's min_nodes
    {"matrix": {"llama2-70b": [16]}},             # more than the pinned nodes
    {"commits": ["a", "b", "c"]},
    {"commits": ["main", "main"]},
])
def test_bad_specs_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(SpecError):
        spec(**bad)


def test_node_lists_of_an_earlier_sweep_are_kept() -> None:
    fresh = node_layout(SMALL, PINNED)
    assert fresh["llama2-70b 1N"] == PINNED[:1] and fresh["llama2-70b 2N"] == PINNED[2:4]
    kept = node_layout(SMALL, PINNED, {"llama2-70b 1N": PINNED[7:8],
                                       "mixtral-8x22b 4N": ["elsewhere1"] * 4})
    assert kept["llama2-70b 1N"] == PINNED[7:8]
    assert kept["mixtral-8x22b 4N"] == PINNED[4:8]  # no longer pinned: the fresh block


def test_judge_follows_the_skill_bands() -> None:
    ok = {"outcome": "pass", "tgs": 1000.0}
    assert judge(ok, {"outcome": "pass", "tgs": 1015.0}) == "no regression"
    assert judge(ok, {"outcome": "pass", "tgs": 970.0}) == "slower (within 5%)"
    assert judge(ok, {"outcome": "pass", "tgs": 940.0}) == "REGRESSION"
    assert judge(ok, {"outcome": "oom", "tgs": None}) == "NEW BREAKAGE"
    assert judge({"outcome": "fail", "tgs": None}, {"outcome": "fail", "tgs": None}) == \
        "pre-existing failure"
    found = evaluate([Column(1, "a", "a", {"m 8N": {"outcome": "fail", "tgs": None}}),
                      Column(2, "b", "b", {"m 8N": {"outcome": "fail", "tgs": None}})])
    assert found["broken_commits"] == ["a", "b"] and len(found["pre_existing"]) == 1


def test_a_later_sweep_judges_only_its_own_commits() -> None:
    """An earlier sweep's regression is history, compared with, not reported again."""
    def col(sweep: int, commit: str, tgs: float) -> Column:
        return Column(sweep, commit, commit, {"m 8N": {"outcome": "pass", "tgs": tgs}})

    series = [col(1, "main", 1000.0), col(2, "cand", 900.0), col(3, "fix", 1010.0)]
    assert [x["commit"] for x in evaluate(series)["regressions"]] == ["cand"]
    assert evaluate(series, since=2)["regressions"] == []
    assert not any("Regression" in line for line in evaluation(series, since=2))
    assert any("Regression" in line for line in evaluation(series[:2], since=1))


def test_fail_fast_stops_on_two_models_newly_broken() -> None:
    s = spec(commits=["main", "cand"], matrix=SMALL)
    new = plan(s, ctx())
    assert isinstance(new, list)
    results: dict[str, tuple[str, float | None]] = {
        "llama2-70b 1N @main": ("pass", 1000.0), "llama2-70b 1N @cand": ("oom", None),
        "mixtral-8x22b 4N @main": ("pass", 900.0)}
    assert plan(s, ctx(as_runs(new, results))) == []          # one model broken: go on
    results["mixtral-8x22b 4N @cand"] = ("fail", None)
    stop = plan(s, ctx(as_runs(new, results)))
    assert isinstance(stop, Stop) and "fail-fast" in stop.reason
    assert stop.rule == FAIL_FAST_RULE
    assert stop.evidence is not None
    check_golden(GOLDEN / "model_sweep" / "fail_fast_evidence.txt", stop.evidence + "\n")
    # A person saw the stop and resumed: the sweep goes on.
    assert plan(s, ctx(as_runs(new, results), acknowledged_stops=[FAIL_FAST_RULE])) == []


def test_all_failing_means_the_commit_is_broken() -> None:
    s = spec(matrix={"llama2-70b": [1, 2]})
    new = plan(s, ctx())
    assert isinstance(new, list)
    done = plan(s, ctx(as_runs(new, {n.label: ("fail", None) for n in new})))
    assert isinstance(done, Finished) and not done.ok and "broken" in done.summary


async def test_gather_resolves_commits_in_a_repo(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                               "user.email=t@e", *args], check=True, capture_output=True,
                              text=True).stdout.strip()
    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "one")
    sha = git("rev-parse", "HEAD")
    store = cast(Store, None)  # no compare_to: the store is not read
    s = spec(commits=["main"], repo=str(tmp_path), matrix={"llama2-70b": [1]})
    facts = await gather(store, s)
    assert facts.shas == {"main": sha}
    new = plan(s, ctx(facts=facts))
    assert isinstance(new, list) and new[0].params.commit == sha
    assert new[0].params.tag == "main"
    with pytest.raises(GatherError, match="nope"):
        await gather(store, spec(commits=["nope"], repo=str(tmp_path)))


# -- on the simulated cluster -----------------------------------------------------------

async def test_regressed_and_broken_models_are_flagged(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0015, commits={
        "cand": {"llama2-70b": {"tgs_factor": 0.9}, "grok-1": {"fail": "oom"}}})
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "model-sweep", "nodes": NODES, "steps": 8,
                                     "commits": ["main", "cand"], "matrix": SMALL})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.state == SweepState.DONE and sweep.verdict is not None
        found = sweep.verdict["evaluation"]
        assert sorted(x["key"] for x in found["regressions"]) == ["llama2-70b 1N",
                                                                   "llama2-70b 2N"]
        assert all(-13 < x["delta_pct"] < -7 and x["commit"] == "cand"
                   for x in found["regressions"])
        assert [(x["key"], x["failure"]) for x in found["new_breakage"]] == [("grok-1 8N", "oom")]
        assert found["pre_existing"] == [] and found["broken_commits"] == []
        runs = {r.label: r for r in await store.runs.of_sweep(sweep.id)}
        assert len(runs) == 8
        assert expand_nodes(runs["llama2-70b 2N @cand"].nodes) == PINNED[2:4]
        assert expand_nodes(runs["grok-1 8N @main"].nodes) == PINNED
        report = "\n".join(lines)
        assert "### llama2-70b (2N on chi" in report and "REGRESSION" in report
        check_golden(GOLDEN / "model_sweep" / "new_breakage_line.txt", "".join(
            line + "\n" for line in report.splitlines() if "**New breakage**" in line))
        assert "mixtral-8x22b 4N @cand" in report and "— PASS" in report  # progressive lines
    finally:
        await store.close()


async def test_fail_fast_stops_before_the_full_size_jobs(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0015, commits={
        "cand": {"llama2-70b": {"fail": "oom"}, "mixtral-8x22b": {"fail": "oom"}}})
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "model-sweep", "nodes": NODES, "steps": 8,
                                     "commits": ["main", "cand"],
                                     "matrix": {**SMALL, "grok-2": [8], "kimi-k2-1t": [8]}})
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert code == EXIT_AWAITING_DECISION
        assert sweep.state == SweepState.AWAITING_DECISION
        assert sweep.reason is not None and "fail-fast" in sweep.reason
        # The stop cancelled the queued full-size jobs: none is left running.
        assert not [j for j in await store.jobs.of_sweep(sweep.id) if j.state in JOB_ACTIVE]
        runs = await store.runs.of_sweep(sweep.id)
        unfinished = [r.label for r in runs if r.state not in ("passed", "failed")]
        assert any("kimi-k2-1t" in label for label in unfinished)
        assert "STOP]" in "\n".join(lines)
    finally:
        await store.close()


async def test_a_later_sweep_is_compared_with_the_earlier_one(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0015, commits={
        "feat-b": {"llama2-70b": {"tgs_factor": 0.97}}})
    config = sim_config(tmp_path, scenario)
    matrix = {"llama2-70b": [1, 2]}
    first, one = await run(config, {"kind": "model-sweep", "nodes": NODES, "steps": 8,
                                     "commits": ["main"], "matrix": matrix})
    assert first == EXIT_VERDICT
    # The first sweep's own table (nothing to compare with), by its columns.
    header = next(line for line in "\n".join(one).splitlines() if line.startswith("| Model |"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Model", "Nodes", "Job", "Avg TGS/device", "Avg MFU", "Status"]
    code, lines = await run(config, {"kind": "model-sweep", "nodes": NODES, "steps": 8,
                                     "commits": ["feat-b"], "matrix": matrix,
                                     "compare_to": 1})
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        earlier, later = await store.sweeps.all()
        assert later.verdict is not None
        assert [c["commit"] for c in later.verdict["history"]] == ["main"]
        # Same model x node count, same nodes in both sweeps.
        assert {r.label.split(" @")[0]: r.nodes for r in await store.runs.of_sweep(earlier.id)} == \
            {r.label.split(" @")[0]: r.nodes for r in await store.runs.of_sweep(later.id)}
        deltas = [x["delta_pct"] for x in later.verdict["evaluation"]["regressions"]]
        report = "\n".join(lines)
        assert "| #1 | main |" in report and "| #2 | feat-b |" in report
        # 0.97 sits between the bands: slower, but not a flagged regression.
        assert deltas == [] and "slower (within 5%)" in report
    finally:
        await store.close()


def test_a_ref_is_shown_with_the_commit_it_was() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert _commit({"commit": "HEAD-1", "sha": sha}) == "HEAD-1 (01234567)"
    assert _commit({"commit": "01234567", "sha": sha}) == "01234567"   # a SHA given as such
    assert _commit({"commit": "cand", "sha": "cand"}) == "cand"   # no repo: a label


# -- all models fail -> stop (issue 23 item 7) ----------------------------------------------

def test_a_single_commit_whose_first_jobs_fail_the_same_way_over_two_models_stops() -> None:
    """No baseline column, so 'newly broken' can never fire; the SKILL.md's 'all models
    fail -> stop' does, once jobs of two distinct models failed the same way and none
    passed."""
    s = spec(commits=["broken"])
    new = plan(s, ctx())
    assert isinstance(new, list) and len(new) == 10
    one = {"llama2-70b 1N @broken": ("config_error", None)}
    assert plan(s, ctx(as_runs(new, one))) == []                # one failure: not yet
    # One model's 1N and 2N failing alike is that model's problem, not every model's.
    same_model = {**one, "llama2-70b 2N @broken": ("config_error", None)}
    assert plan(s, ctx(as_runs(new, same_model))) == []
    two = {**same_model, "mixtral-8x22b 4N @broken": ("config_error", None)}
    stop = plan(s, ctx(as_runs(new, two)))
    assert isinstance(stop, Stop) and stop.rule == ALL_FAIL_RULE
    # The first 3 jobs, 2 distinct models of the spec's 8, the one way they failed, and the
    # 7 jobs it stops before; the evidence job by job.
    check_golden_cases(GOLDEN / "model_sweep" / "all_models_fail.txt",
                       {"reason": stop.reason, "evidence": f"{stop.evidence}"})
    # Two different failures may be two models' own problems: no stop on that alone.
    mixed = {**one, "mixtral-8x22b 4N @broken": ("oom", None)}
    assert plan(s, ctx(as_runs(new, mixed))) == []
    # A pass anywhere on the commit: not all models fail.
    passing = {**two, "grok-1 8N @broken": ("pass", 900.0)}
    assert plan(s, ctx(as_runs(new, passing))) == []
    # A person saw the stop and resumed: not asked again.
    assert plan(s, ctx(as_runs(new, two), acknowledged_stops=[ALL_FAIL_RULE])) == []


def test_a_one_model_spec_stops_on_that_models_jobs() -> None:
    """Fewer models in the spec than the rule's two: every model of the spec suffices."""
    s = spec(commits=["broken"], matrix={"llama2-70b": [1, 2, 8]})
    new = plan(s, ctx())
    assert isinstance(new, list) and len(new) == 3
    both = {"llama2-70b 1N @broken": ("config_error", None),
            "llama2-70b 2N @broken": ("config_error", None)}
    stop = plan(s, ctx(as_runs(new, both)))
    assert isinstance(stop, Stop) and stop.rule == ALL_FAIL_RULE
    check_golden_cases(GOLDEN / "model_sweep" / "all_models_fail_one_model.txt",
                       {"reason": stop.reason})


async def test_a_broken_single_commit_stops_after_its_small_jobs(tmp_path: Path) -> None:
    """Every model fails on the commit: the sweep stops once the first two small jobs have
    failed the same way, and the 8-node jobs queued behind them never run."""
    scenario = write_scenario(tmp_path, time_scale=0.0015, commits={
        "broken": {m: {"fail": "config_error"} for m in
                   ["llama2-70b", "mixtral-8x22b", "grok-1", "grok-2", "llama3.1-405b",
                    "deepseek3-671b", "kimi-k2-1t", "qwen3-480b-a35b"]}})
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "model-sweep", "nodes": NODES, "steps": 8,
                                     "commits": ["broken"]})
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert code == EXIT_AWAITING_DECISION
        assert sweep.reason is not None and sweep.reason.startswith("all models fail on broken")
        runs = await store.runs.of_sweep(sweep.id)
        ended = [r.label for r in runs if r.state in ("passed", "failed")]
        assert len(runs) == 10 and 2 <= len(ended) <= 3
        assert all(" 8N " not in label for label in ended)
        assert not [j for j in await store.jobs.of_sweep(sweep.id) if j.state in JOB_ACTIVE]
        assert "STOP]" in "\n".join(lines)
    finally:
        await store.close()
