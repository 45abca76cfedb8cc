"""A campaign on the local real Slurm cluster (direct mode, the simulated trainer as the
payload) with a `kill -9` of the daemon in each stage: started again each time, each stage
resumes where it was, no job is in Slurm twice or unknown to the store, and the campaign
reaches the same final verdict as the uninterrupted campaign of the same scenario and seed,
run first on the same cluster (and the one the scenario's truth makes: the slow node out,
the batch curve's peak, the one flag that helps, a confirmed gain whose interval holds the
simulator's true gain).

What "the same verdict" compares (`decisions`): every decision the campaign made, exactly
(the stages and skipped ones, the excluded nodes and their band, the network check's
finding, the frozen nodes; per parallelism the batch, the flags stage's verdict and recipe,
the confirm stage's candidate and whether its interval confirms a gain). Not the measured
figures (TGS, the deltas, the gain and its interval): the simulated trainer seeds a job's
noise by the scenario's seed and its Slurm job id, and Slurm numbers the two runs' jobs
differently, so two runs of one seed measure the same truth with different noise."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.kinds.xla_tuning.exports import sim_true_gain
from sweepd.sim.scenario import load_scenario
from tests.campaign_waits import STAGES, SWEEPS, decisions, stage_running, wait_for
from tests.daemon_proc import Daemon
from tests.simrun import NODES
from tests.support.slurm import slurm_jobs, write_slurm_config
from tests.support.slurm_campaign import PAG, SLOT, SPEC

pytestmark = pytest.mark.slurm



def scenario(tmp_path: Path) -> Path:
    """One FSDP=2 cell (pipelined all-gather +8 %, 8 channels -1 %) times the model's batch
    curve (peak at 9, the config's 7), chi2868 7 % slow."""
    landscape = {"parallelism": "FSDP=2", "tags": ["default"], "base_tgs": {"default": 1000.0},
                 "noise": 0.004, "effects": {f"{PAG}=true": {"tgs": 1.08},
                                             "NCCL_NCHANNELS_PER_NET_PEER=8": {"tgs": 0.99}}}
    data = {"cluster": {"nodes": NODES, "gpu": "MI355X", "gpu_memory_gib": 288,
                        "time_scale": 0.001, "noise": 0.004, "seed": 5},
            "models": {"deepseek3-671b": {"max_batch": 12, "peak_batch": 9, "peak_tgs": 1300,
                                          "nodes": 2}},
            "nodes": {"chi2868": {"speed": 0.93}},
            "tuning": {"model": "deepseek3-671b", "landscapes": [landscape],
                       "per_device_batch_size": 7}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_campaign(where: Path, land: Path, kill: bool) -> dict[str, Any]:
    """The campaign from submission to its end (`show`), with a kill -9 and a start of the
    daemon in each stage when `kill`."""
    where.mkdir()
    daemon = Daemon(where, write_slurm_config(where, "direct", land))
    try:
        client = daemon.start()
        campaign = int(client.submit(SPEC)["id"])
        for stage in STAGES if kill else ():
            wait_for(f"stage {stage} under way", lambda s=stage: stage_running(
                where, campaign, s), 400)
            daemon.kill()   # SIGKILL: no clean-up of any kind
            client = daemon.start()
        wait_for("the campaign's end", lambda: client.reads.show(campaign)["state"] in (
            "done", "failed", "aborted", "awaiting_decision"), 500)
        shown: dict[str, Any] = client.reads.show(campaign)
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    assert [s["stage"] for s in shown["stages"]] == list(SWEEPS)
    return shown


@pytest.mark.timeout(1200)
def test_kill_9_in_each_stage_of_a_campaign_on_slurm(slurm_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    land = scenario(tmp_path)
    plain = run_campaign(tmp_path / "a", land, kill=False)
    before = max((jid for jid, _ in slurm_jobs()), default=0)
    where = tmp_path / "b"
    shown = run_campaign(where, land, kill=True)
    with sqlite3.connect(f"file:{where / 'state' / 'sweepd.db'}?mode=ro", uri=True) as db:
        sweeps = db.execute("SELECT count(*) FROM sweeps").fetchone()[0]
        ids = [str(r[0]) for r in db.execute("SELECT backend_id FROM jobs")]
        confirm_spec = db.execute("SELECT spec_json FROM sweeps WHERE id = ?",
                                  (shown["stages"][-1]["sweep"],)).fetchone()[0]
    assert sweeps == 1 + len(SWEEPS)   # each stage resumed, none started again
    # No job twice in Slurm, none there the store does not know, none in the store twice.
    ours = [(jid, tok) for jid, tok in slurm_jobs(within=SLOT) if jid > before]
    tokens = [tok for _, tok in ours]
    assert None not in tokens and len(tokens) == len(set(tokens)), ours
    assert "None" not in ids and len(ids) == len(set(ids))
    assert sorted(str(jid) for jid, _ in ours) == sorted(ids)
    # The same final verdict as the uninterrupted campaign of the same seed.
    killed = decisions(shown["verdict"], json.loads(confirm_spec)["candidate"])
    with sqlite3.connect(f"file:{tmp_path / 'a' / 'state' / 'sweepd.db'}?mode=ro",
                         uri=True) as db:
        plain_confirm = db.execute("SELECT spec_json FROM sweeps WHERE id = ?",
                                   (plain["stages"][-1]["sweep"],)).fetchone()[0]
    assert killed == decisions(plain["verdict"], json.loads(plain_confirm)["candidate"])
    # And the verdict the scenario's truth makes.
    assert killed["excluded"] == {"chi2868": "degraded"} and killed["nodes"] == "chi[2867,2880]"
    (cell,) = killed["cells"]
    assert cell["batch"] == 9 and cell["flags"]["xla_flags"] == [f"--{PAG}=true"]
    assert cell["confirmed"] == "gain"
    (verdict_cell,) = shown["verdict"]["cells"]
    low, high = verdict_cell["confirmed"]["interval"]
    cand = json.loads(confirm_spec)["candidate"]
    truth = sim_true_gain(load_scenario(land), {"dcn_fsdp_parallelism": "2"},
                          ["chi2867", "chi2880"], cand["batch"], cand["xla_flags"], {})
    # A 95 % interval misses the truth in 1 of 20 campaigns by design (one CI run: +25.58 %
    # against +25.65..+26.25 %): the truth within twice its half-width (~4 sigma) holds
    # unless the interval is wrong, which is what this checks.
    half = (high - low) / 2
    assert truth is not None and abs((low + high) / 2 - truth.gain) <= 2 * half, \
        (low, truth.gain, high)
