"""The cost cap: a sweep stops before it submits the job that would pass its node-hour cap
(the spec's `max_node_hours`, else the 8 h timebox x its nodes or the most `validate`
states where larger), with its rule recorded; `validate` prints the cap and its source
beside the most jobs and node-hours, and the sweep's start says it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.cli.main import main
from sweepd.config import Config
from sweepd.core.cost_cap import CapCheck, applied_cap, check_cap
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import Job, RunParams
from sweepd.store.spans import span_of
from sweepd.store.store import Store
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.simrun import open_store, perf_spec, run, sim_config, write_scenario

EXAMPLES = Path(__file__).parent.parent / "examples"


async def test_a_sweep_stops_before_the_job_that_would_pass_its_cap(tmp_path: Path) -> None:
    config = sim_config(tmp_path, write_scenario(tmp_path))
    # A job here takes a few cluster minutes on 8 nodes: about 1 node-hour each.
    code, lines = await run(config, perf_spec(values=[2, 4, 6, 8, 10, 12],
                                              max_node_hours=1.5))
    assert code == 3, lines   # stopped for a person
    store = await open_store(config)
    try:
        sweep = await store.sweeps.get(1)
        jobs = await store.jobs.of_sweep(1)
        events = await store.events.of_sweep(1)
    finally:
        await store.close()
    rules = [e.rule for e in events]
    assert sweep.state == "awaiting_decision" and "budget.node_hours" in rules
    # Said at the start, before the first job, and in the stop.
    started = [e for e in events if e.rule == "engine.start"]
    assert started
    check_golden_cases(GOLDEN / "cost_cap" / "spec_cap_said.txt", {
        "at the start": started[0].reason,
        # The node-hours taken are the sim's measured job times: not the same each run.
        "the stop": re.sub(r"\b\d+\.\d\d\b", "<node-h>", f"{sweep.reason}")})
    submitted = [j for j in jobs if j.backend_id is not None]
    assert 1 <= len(submitted) < 6
    assert jobs[-1].backend_id is None and jobs[-1].state == "failed"


def test_the_default_cap_is_the_timebox_or_the_stated_most_where_larger() -> None:
    config = Config()
    spec = parse_spec(perf_spec())
    cap = applied_cap(spec, config)
    assert cap.hours == 8.0 * len(spec.node_list) and cap.source.startswith("the 8 h timebox")
    assert applied_cap(parse_spec(perf_spec(max_node_hours=20)), config).hours == 20
    # An XLA tuning sweep's last wave runs past its 8 h timebox: its cap is its most.
    xla = parse_spec(yaml.safe_load((EXAMPLES / "xla-tuning.yaml").read_text()))
    cap = applied_cap(xla, config)
    assert cap.hours == 124 > 8.0 * len(xla.node_list) and "the most" in cap.source


@pytest.mark.parametrize("example", sorted(
    p.name if p.parent == EXAMPLES else f"{p.parent.name}/{p.name}"
    for p in [*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("*/*.yaml")]
    if p.parent.name != "scenarios" and "replay" not in p.name))
def test_validate_states_the_most_and_the_cap_of_every_example(
        example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _no_config(tmp_path, monkeypatch)
    # The plan `at most:` is rendered from (its wording: validate_cap_beside_the_most.txt).
    assert main(["validate", str(EXAMPLES / example), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    said = " ".join(str(plan.get(k)) for k in ("runs_unbounded", "node_hours_basis",
                                              "node_hour_cap_basis"))
    assert "unknown" not in said and "the kind sets no most" not in said, plan
    # Jobs: a number, or why none is fixed; node-hours: a figure, or why none bounds them;
    # and always the cap the sweep stops at, with its source.
    assert plan["most_jobs"] is not None if plan["most_runs"] is not None \
        else plan["runs_unbounded"], plan
    assert plan["node_hours_basis"], plan
    assert plan["node_hour_cap"] > 0 and plan["node_hour_cap_basis"], plan


def test_validate_prints_the_cap_beside_the_most(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _no_config(tmp_path, monkeypatch)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(perf_spec(max_node_hours=12.5)))
    assert main(["validate", str(path)]) == 0
    said: dict[str, str] = {}

    def at_most() -> str:
        most = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("at most")]
        assert len(most) == 1, most
        return most[0]

    said["the spec's max_node_hours 12.5"] = at_most()
    path.write_text(yaml.safe_dump(perf_spec()))
    assert main(["validate", str(path)]) == 0
    said["the 8 h timebox x 8 nodes"] = at_most()
    path.write_text((EXAMPLES / "campaign.yaml").read_text())
    assert main(["validate", str(path)]) == 0
    said["the campaign: its stages' caps summed"] = at_most()
    check_golden_cases(GOLDEN / "cost_cap" / "validate_cap_beside_the_most.txt", said)


def _no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("SWEEPD_CONFIG", raising=False)
    monkeypatch.setattr("sweepd.config.SYSTEM_CONFIG", tmp_path / "absent.toml")


def test_validate_says_up_front_that_given_values_may_not_all_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`values: [4, 6, 8, 10]` ran 6 and 10 only: the first plan says so before any job."""
    _no_config(tmp_path, monkeypatch)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(perf_spec(values=[4, 6, 8, 10])))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    check_golden(GOLDEN / "cost_cap" / "values_may_not_all_run.txt",
                 "".join(f"{line}\n" for line in out.splitlines() if "values given" in line))


# Each job: (nodes, submitted_at, ended_at, last_output_at, span_start, span_end), the
# fields `span_of` reads: printed spans, a scheduler's span, one under way (no end yet),
# one never submitted, one whose printed end is before its start.
_JOBS: list[tuple[str, float | None, float | None, float | None, float | None, float | None]] = [
    ("n[1-2]", 0.0, 1800.0, None, None, None),
    ("n[1-2]", 100.0, 2000.0, 1990.0, 150.0, 1950.0),
    ("n[1-8]", 200.0, None, 4000.0, None, None),
    ("n[1-8]", None, None, None, None, None),
    ("n3", 300.0, 5000.0, None, 900.0, 800.0),
    ("n[1-2]", 400.0, 3000.0, None, None, None),
]


async def _store_with(tmp_path: Path, jobs: list[tuple[Any, ...]]) -> tuple[Store, list[int]]:
    store = await Store.open(tmp_path / "state.db")
    sweep = await store.sweeps.create("model-perf", "cap", {"kind": "model-perf"})
    ids = []
    for k, job in enumerate(jobs):
        ids.append(await _add_job(store, sweep, k, job[0]))
        await _ran(store, ids[-1], job)
    return store, ids


async def _add_job(store: Store, sweep: int, k: int, nodes: str) -> int:
    """A job written ahead of its submission, as `Submitter.submit` meets it."""
    run = await store.runs.add(sweep, f"r{k}", RunParams(), nodes, "test")
    return (await store.jobs.create(run, f"t{k}", "JAX-x", nodes)).id


async def _ran(store: Store, job_id: int, job: tuple[Any, ...]) -> None:
    _, submitted, ended, output, start, end = job
    await store.jobs.update(job_id, submitted_at=submitted, ended_at=ended,
                            last_output_at=output, span_start=start, span_end=end)


def _check_job_by_job(jobs: list[Job], next_nodes: int, cap: float,
                      node_jobs: int | None = None) -> CapCheck:
    """The cap's check as it read every job's row before the store summed them."""
    spent, per_node_hours = 0.0, []
    for job in jobs:
        span = span_of(job)
        if span is None:
            continue
        hours = max(0.0, span.end - span.start) / 3600
        spent += hours * len(expand_nodes(job.nodes))
        if job.ended_at is not None:
            per_node_hours.append(hours)
    mean = sum(per_node_hours) / len(per_node_hours) if per_node_hours else 0.0
    if node_jobs is not None:
        cap = max(cap, round(node_jobs * mean, 2))
    return CapCheck(spent=spent, next_job=mean * next_nodes, cap=cap)


async def test_the_stores_span_sums_are_the_jobs_spans_summed(tmp_path: Path) -> None:
    store, ids = await _store_with(tmp_path, _JOBS)
    try:
        for leave_out in [*ids, -1]:
            rows = [j for j in await store.jobs.of_sweep(1) if j.id != leave_out]
            totals = await store.jobs.span_totals(1, leave_out=leave_out)
            by_nodes: dict[str, list[Job]] = {}
            for job in rows:
                if span_of(job) is not None:
                    by_nodes.setdefault(job.nodes, []).append(job)
            assert [t.nodes for t in totals] == sorted(by_nodes)
            for t in totals:
                spans = [(s, j) for j in by_nodes[t.nodes] if (s := span_of(j)) is not None]
                assert t.seconds == pytest.approx(sum(s.end - s.start for s, _ in spans))
                assert t.ended_seconds == pytest.approx(
                    sum(s.end - s.start for s, j in spans if j.ended_at is not None))
                assert t.ended == sum(j.ended_at is not None for _, j in spans)
            for node_jobs in (None, 40):
                new = check_cap(totals, 8, 3.0, node_jobs)
                old = _check_job_by_job(rows, 8, 3.0, node_jobs)
                assert new.spent == pytest.approx(old.spent)
                assert new.next_job == pytest.approx(old.next_job)
                assert new.cap == old.cap and new.passed == old.passed
    finally:
        await store.close()


async def test_the_cap_stops_a_sweep_at_the_same_job(tmp_path: Path) -> None:
    """Jobs of 0.25 h on 2 nodes, cap 2.2 node-hours: each checked as it is written (before
    it runs), the fifth is the first refused (2 node-h taken + 0.5 expected), as it was when
    every job's row was read."""
    store = await Store.open(tmp_path / "state.db")
    sweep = await store.sweeps.create("model-perf", "cap", {"kind": "model-perf"})
    try:
        refused = []
        for k in range(8):
            job_id = await _add_job(store, sweep, k, "n[1-2]")
            others = [j for j in await store.jobs.of_sweep(sweep) if j.id != job_id]
            new = check_cap(await store.jobs.span_totals(sweep, leave_out=job_id), 2, 2.2)
            old = _check_job_by_job(others, 2, 2.2)
            assert new.passed == old.passed and new.spent == pytest.approx(old.spent)
            if new.passed:
                refused.append(k)
            await _ran(store, job_id, ("n[1-2]", k * 1000.0, k * 1000.0 + 900.0, None, None,
                                       None))
        assert refused == [4, 5, 6, 7]
    finally:
        await store.close()
