"""Nodes that slow from their k-th job on (`NodeSpec.slows_from_job`): each job's number on
each node, counted across processes.

A job's number on a node is the order in which jobs first asked for it there, recorded per
job id in `<state-dir>/node-jobs.json` under a lock (as `faults.claim` records fault uses):
every rank of one job, and a re-read by the same job, get the same number, so a job runs at
one speed throughout and the same scenario and seed always slow the same jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sweepd.sim.scenario import Scenario
from sweepd.sim.statefiles import atomic_write_json, locked, read_json

JOBS_FILE = "node-jobs.json"


def job_number(state_dir: Path, node: str, job_id: str) -> int:
    """This job's number (1-based) among the jobs that have run on `node`."""
    path = state_dir / JOBS_FILE
    with locked(state_dir / f"{JOBS_FILE}.lock"):
        jobs: dict[str, list[str]] = read_json(path, {})
        mine = jobs.setdefault(node, [])
        if job_id not in mine:
            mine.append(job_id)
            atomic_write_json(path, jobs)
        return mine.index(job_id) + 1


def at_job(scenario: Scenario, state_dir: Path, job_id: str, nodes: Sequence[str]) -> Scenario:
    """The scenario as this job meets it: each of its nodes that has slowed by now at its
    `slowed_speed`. Unchanged (and no state file touched) when none of them ever slows."""
    slowing = [n for n in nodes if scenario.node(n).slows_from_job is not None]
    if not slowing:
        return scenario
    changed = dict(scenario.nodes)
    for node in slowing:
        spec = scenario.node(node)
        if job_number(state_dir, node, job_id) >= (spec.slows_from_job or 0):
            changed[node] = spec.model_copy(update={"speed": spec.slowed_speed})
    if changed == scenario.nodes:
        return scenario
    return scenario.model_copy(update={"nodes": changed})
