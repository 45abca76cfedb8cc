"""`sweepd show`: a sweep's state, progress, campaign links, exclusions and verdict, then its
runs and jobs tables."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sweepd.cli.client import Client
from sweepd.cli.output import cell, client_command, format_table, print_json, say
from sweepd.util.text import escape

_RUN_COLUMNS = [("seq", "#"), ("label", "RUN"), ("state", "STATE"), ("outcome", "OUTCOME"),
                ("tgs", "TGS"), ("mfu", "MFU"), ("failure_class", "FAILURE")]
_JOB_COLUMNS = [("id", "JOB"), ("run_seq", "RUN #"), ("attempt", "TRY"), ("backend_id", "SLURM ID"),
                ("nodes", "NODES"), ("state", "STATE"), ("failure_class", "FAILURE")]


@client_command
def run_show(args: argparse.Namespace, client: Client) -> int:
    s = client.reads.show(args.id)
    if args.json:
        print_json(s)
        return 0
    say(f"sweep {s['id']}: {escape(s['name'])}")
    say(f"  kind: {s['kind']}   nodes: {escape(str(s['spec'].get('nodes', '-')))}")
    say(f"  state: {s['state']}" + (f" ({escape(s['reason'])})" if s.get("reason") else ""))
    say(f"  created: {s['created_at']}   updated: {s['updated_at']}"
        + (f"   by: {escape(s['submitted_by'])}" if s.get("submitted_by") else ""))
    say(f"  progress: {s['progress']['line']}")
    for line in _waiting(s):
        say(f"  waiting: {escape(line)}")
    if s.get("campaign"):
        say(f"  campaign: sweep {s['campaign']['id']}, stage {s['campaign']['stage']}")
    if s.get("stages"):
        say("  stages: " + ", ".join(f"{c['stage']} = sweep {c['sweep']} ({c['state']})"
                                     for c in s["stages"]))
    if s["progress"]["eta_s"]:
        say(f"  ETA basis: {s['progress']['eta_basis']}")
    excluded = [e["node"] for e in s["exclusions"] if e.get("active")]
    if excluded:
        say(f"  excluded nodes: {escape(', '.join(excluded))}")
    for line in s.get("leftovers") or []:   # in the person's files, removed or left
        say(f"  files: {escape(line)}")
    if s["verdict"]:
        _print_verdict(s["id"], s["verdict"])
    # Jobs name their run by the runs table's `#`, not by the store's global run id.
    seq_of = {r["id"]: r["seq"] for r in s["run_list"]}
    jobs = [{**j, "run_seq": seq_of.get(j["run_id"], j["run_id"])} for j in s["jobs"]]
    for title, rows, columns in (("runs", s["run_list"], _RUN_COLUMNS),
                                 ("jobs", jobs, _JOB_COLUMNS)):
        if rows:
            say(f"\n{title}:")
            say(format_table(rows, columns))
    return 0


def _waiting(s: Mapping[str, Any]) -> list[str]:
    """What each queued job waits for, where the engine said it (a job on the local backend
    waiting for the accelerator another sweepd process holds): its latest progress line."""
    queued = {j["id"] for j in s["jobs"] if j["state"] == "queued"}
    last: dict[int, str] = {}
    for e in s.get("events") or []:
        if e.get("job_id") in queued and e.get("kind") == "progress":
            last[e["job_id"]] = e["reason"]
    return [line for line in last.values() if " waits for " in line]


def _print_verdict(sweep_id: int, verdict: Mapping[str, Any]) -> None:
    """Its plain fields; tables and lists are the report's to show."""
    say("  verdict:")
    nested = []
    for key, value in sorted(verdict.items()):
        if isinstance(value, dict | list):
            nested.append(key)
        else:
            say(f"    {escape(key)}: {cell(value)}")
    if nested:
        say(f"    ({escape(', '.join(nested))}: see `sweepd report {sweep_id}`)")
