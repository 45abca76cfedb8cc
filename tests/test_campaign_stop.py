"""A stage that stops and asks stops its campaign and asks (a real daemon on the simulated
cluster): the campaign's stop names the stage's sweep; the person resumes that sweep and
the campaign, and the campaign goes on from the same stage to its verdict; a skipped stage
(its sweep aborted) is passed over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sweepd.kinds.campaign.demo import DEMO, SCENARIO
from tests.campaign_waits import wait_for
from tests.daemon_proc import Daemon, write_config
from tests.golden_files import GOLDEN, check_golden_cases

ENDED = ("done", "failed", "aborted", "awaiting_decision")


def _scenario(tmp_path: Path) -> Path:
    """The demo's, with the model's first two jobs dying in coordination timeouts: two in a
    row stop the batch stage (`coord.consecutive`)."""
    raw = yaml.safe_load(SCENARIO.read_text())
    raw["faults"] = [{"kind": "coord_timeout", "model": "deepseek3-671b", "times": 2}]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _stage(shown: dict[str, Any], name: str) -> int:
    return int(next(s["sweep"] for s in shown["stages"] if s["stage"] == name))


def test_a_stopped_stage_stops_the_campaign_and_a_resume_goes_on_from_it(
        tmp_path: Path) -> None:
    spec = {**DEMO.specs[0], "stages": ["batch", "confirm"]}
    daemon = Daemon(tmp_path, write_config(tmp_path, _scenario(tmp_path)))
    try:
        client = daemon.start()
        campaign = int(client.submit(spec)["id"])
        wait_for("the campaign's stop", lambda: client.reads.show(campaign)["state"] in ENDED)
        stopped = client.reads.show(campaign)
        batch = _stage(stopped, "batch")
        assert stopped["state"] == "awaiting_decision", stopped["reason"]
        assert client.reads.show(batch)["state"] == "awaiting_decision"
        # The stage stopped on its own rule, two coordination timeouts in a row.
        batch_stops = [e["rule"] for e in client.reads.show(batch)["events"]
                       if e["to_state"] == "awaiting_decision"]
        assert batch_stops == ["coord.consecutive"]
        stopped_reason = stopped["reason"]
        # The person's word: the stage goes on, then the campaign.
        client.controls.resume(batch)
        client.controls.resume(campaign)
        wait_for("the campaign's end", lambda: client.reads.show(campaign)["state"] in ENDED)
        shown = client.reads.show(campaign)
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    assert [s["stage"] for s in shown["stages"]] == ["batch", "confirm"]
    assert _stage(shown, "batch") == batch   # the same stage's sweep, resumed
    (cell,) = shown["verdict"]["cells"]
    assert cell["batch"]["best"] == 9
    assert cell["confirmed"]["claim"].startswith("confirmed gain +")
    stops = [e for e in shown["events"] if e["to_state"] == "awaiting_decision"]
    assert [e["rule"] for e in stops] == [f"campaign.stage_stopped.{batch}"]   # asked once
    # The stop message is the campaign's own: its title names the campaign, not a sweep.
    (message,) = [e["reason"] for e in shown["events"]
                  if e["kind"] == "progress" and "STOP]" in e["reason"]]
    # The reason and the stop message a person reads (a fresh daemon: campaign 1, batch 2).
    assert (campaign, batch) == (1, 2)
    check_golden_cases(GOLDEN / "campaign" / "stage_stopped_stops_the_campaign.txt",
                       {"campaign reason": stopped_reason, "stop message": message})
