"""A campaign's budget is spent on the cluster's clock (issue 25): each job's span as its log
printed it, read once by the log pass for every kind's job and kept in the store; on the
simulated cluster its own clock, so a budget smaller than the stages need ends the campaign
at the same stage, with the same hours spent, however fast the machine runs the simulation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiosqlite
import yaml

from sweepd.core.jobtimes import span_of
from sweepd.core.log_facts import facts_of
from sweepd.core.states import JobState
from sweepd.kinds.campaign.demo import DEMO, SCENARIO
from sweepd.kinds.campaign.gather import gather
from sweepd.kinds.campaign.report import markdown
from sweepd.kinds.campaign.spec import CampaignSpec
from sweepd.kinds.campaign.spent import spent_hours
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.registry import GatherContext
from sweepd.monitor.facts import ClusterTimeFact
from sweepd.monitor.parse import parse_line
from sweepd.store.migrate import _statements, current_version, migrate, migrations
from sweepd.store.rows import Job
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.simrun import open_store, run, sim_config

HOUR = 3600.0


def _job(**extra: Any) -> Job:
    fields: dict[str, Any] = {
        "id": 1, "run_id": 1, "sweep_id": 1, "attempt": 1, "token": "t", "job_name": "",
        "nodes": "chi2832", "backend_id": "101", "log_path": None, "state": JobState.DONE,
        "scheduler_state": None, "submitted_at": None, "ended_at": None, "log_offset": 0,
        "log_identity": None, "last_output_at": None, "phase": "training", "last_step": None,
        "profiler": 0, "mem_used_gb": None, "mem_limit_gb": None, "summary_status": None,
        "summary_exit": None, "node_map_json": None, "tgs": None, "mfu": None,
        "failure_class": None, "failure_node": None, "failure_line": None,
        "failure_detail": None, "submit_deadline": None}
    return Job(**{**fields, **extra})


def test_the_summarys_cluster_time_is_a_span_fact_of_every_job() -> None:
    assert parse_line("  Cluster time: 612.500s to 1512.250s") == ClusterTimeFact(612.5, 1512.25)
    assert parse_line("0:   Cluster time: 1s to 2s") == ClusterTimeFact(1.0, 2.0)
    assert parse_line("  Cluster time: 1.2.3s to 4s") is None   # never a parse that raises
    # The log pass stores it whatever the job's kind (no kind's hook is involved).
    chunk = facts_of(_job(), [(0, "  Status: SUCCESS (exit 0)"),
                              (30, "  Cluster time: 612.500s to 1512.250s")])
    assert (chunk.fields["span_start"], chunk.fields["span_end"]) == (612.5, 1512.25)
    assert "span_start" not in facts_of(_job(), [(0, "completed step: 1, loss: 3.0")]).fields


def test_spent_hours_read_the_printed_clock_alone_else_submission_to_end() -> None:
    # The simulated cluster: the daemon's times (wall / time_scale) are not the cluster's.
    sim = [_job(submitted_at=0.0, ended_at=9 * HOUR, span_start=100.0, span_end=100 + HOUR),
           _job(submitted_at=9.5 * HOUR, ended_at=20 * HOUR, span_start=100 + HOUR,
                span_end=100 + 2.5 * HOUR),
           _job(submitted_at=21 * HOUR, ended_at=22 * HOUR)]   # cancelled while queued
    assert spent_hours(sim) == 2.5
    # A real cluster: submission (the queue wait) to the scheduler's end, the time between
    # stages included; a job under way to its last output.
    slurm = [_job(submitted_at=0.0, ended_at=HOUR), _job(submitted_at=2 * HOUR, ended_at=None,
                                                         last_output_at=3 * HOUR)]
    assert spent_hours(slurm) == 3.0
    assert spent_hours([_job()]) == 0.0 and span_of(_job()) is None


async def test_a_store_from_before_keeps_the_span_the_xla_kind_kept(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "db", isolation_level=None)
    try:
        await current_version(conn)   # creates schema_version
        for m in migrations()[:9]:
            for statement in _statements(m.sql):
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_version (version) VALUES (?)", (m.version,))
        await conn.execute("INSERT INTO sweeps (id, kind, name, spec_json, state) VALUES "
                           "(1, 'xla-tuning', 'x', '{}', 'running')")
        await conn.execute("INSERT INTO runs (id, sweep_id, seq, label, params_json, nodes, "
                           "state) VALUES (1, 1, 1, 'a', '{}', 'n1', 'passed')")
        for attempt, (token, facts) in enumerate([
                ("a", '{"span": [10.0, 910.5], "xla": ""}'), ("b", '{"xla": ""}'), ("c", None)]):
            await conn.execute("INSERT INTO jobs (run_id, sweep_id, attempt, token, job_name, "
                               "nodes, facts_json) VALUES (1, 1, ?, ?, 'j', 'n1', ?)",
                               (attempt + 1, token, facts))
        await migrate(conn)
        async with conn.execute("SELECT token, span_start, span_end FROM jobs "
                                "ORDER BY token") as cur:
            assert list(await cur.fetchall()) == [("a", 10.0, 910.5), ("b", None, None),
                                                  ("c", None, None)]
    finally:
        await conn.close()


# The demo's scenario, faults off; its campaign from batch on, whose batch stage takes
# 1.45 h of the cluster's clock (serial 8-node jobs): a 1 h budget is spent before flags.
BUDGET_H = 1.0
CLUSTER_TIME = re.compile(r"^\s*Cluster time: ([0-9.]+)s to ([0-9.]+)s$", re.M)


async def _budgeted_campaign(tmp_path: Path, time_scale: float) -> dict[str, Any]:
    raw = yaml.safe_load(SCENARIO.read_text())
    raw["cluster"]["time_scale"] = time_scale
    raw["faults"] = []
    tmp_path.mkdir()
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    config = sim_config(tmp_path, scenario)
    spec = {**DEMO.specs[0], "stages": ["batch", "flags", "confirm"], "budget_hours": BUDGET_H}
    await run(config, spec)
    # What a restarted daemon reads: the store alone.
    store = await open_store(config)
    try:
        campaign = await store.sweeps.get(1)
        parsed = parse_spec(campaign.spec)
        assert isinstance(parsed, CampaignSpec)
        facts = await gather(store, parsed, GatherContext(sweep=campaign.id))
        jobs = [j for link in await store.campaigns.children(campaign.id)
                for j in await store.jobs.of_sweep(link.child_id)]
    finally:
        await store.close()
    # The spans the jobs' logs printed, read here apart from the monitor.
    printed = [(float(a), float(b)) for j in jobs if j.log_path
               for a, b in CLUSTER_TIME.findall(Path(j.log_path).read_text())]
    return {"reason": campaign.reason or "", "verdict": campaign.verdict or {},
            "spent": facts.spent_hours, "report": markdown(campaign, [], []),
            "printed": (max(b for _, b in printed) - min(a for a, _ in printed)) / HOUR}


async def test_a_budget_binds_on_the_clusters_clock_however_fast_the_machine_runs_it(
        tmp_path: Path) -> None:
    # 0.002: each job ~2 s of wall time; 0.0002: ten times faster, the daemon's passes as
    # slow as before, each ten times as long on its clock (wall / time_scale).
    slow = await _budgeted_campaign(tmp_path / "slow", 0.002)
    fast = await _budgeted_campaign(tmp_path / "fast", 0.0002)
    for got in (slow, fast):
        # The reason and the report say the hours gather counted (scrubbed to `<spent>`).
        check_golden_cases(GOLDEN / "campaign" / "budget_spent_on_the_clusters_clock.txt", {
            name: scrubbed(got[name], spent=f"{got['spent']:.1f} h")
            for name in ("reason", "report")})
        assert got["verdict"]["budget_spent"] and got["verdict"]["cells"][0]["batch"]["best"]
        # The spent hours are the span of the stages' jobs on the cluster's clock, as their
        # logs printed it, and the verdict and a restarted daemon's gather say the same.
        assert abs(got["spent"] - got["printed"]) < 1e-6, got
        assert got["verdict"]["spent_hours"] == round(got["spent"], 3)
    print(f"spent on the cluster's clock at 0.002: {slow['spent']:.3f} h, "
          f"at 0.0002: {fast['spent']:.3f} h")
    assert abs(slow["spent"] - fast["spent"]) < 0.01, (slow["spent"], fast["spent"])
