"""A `kill -9` of a real daemon (`sweepd serve`) in the middle of an xla-tuning wave on the
local real Slurm cluster, direct and submit.sh mode: started again, it finishes the same
sweep with no job submitted twice (no sweepd token twice in Slurm's job history, no
scheduler id twice in the store) and no profile lost; in submit.sh mode train_env.sh
still holds each arm once."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.clusters import train_env as te
from tests.daemon_proc import Daemon
from tests.support.slurm import PAG, SPEC, _toml, neutral, scenario, slurm_jobs, write_slurm_config  # noqa: F401
from tests.xla_waits import planned as _planned
from tests.xla_waits import until_ended as _until_ended
from tests.xla_waits import until_mid_wave as _until_mid_wave

pytestmark = pytest.mark.slurm








@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["direct", "submit_sh"])
async def test_kill_9_mid_wave_on_slurm_resumes_without_a_duplicate_or_a_lost_profile(
        mode: str, slurm_env: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOB_WORKSPACE", str(tmp_path / "workspace"))  # direct mode's dump
    land = scenario(tmp_path, effects={f"{PAG}=true": {"tgs": 1.10}})
    profiles = [{"name": "pag", "settings": {PAG: "true"}}, *(neutral(i) for i in range(4))]
    before = max((jid for jid, _ in slurm_jobs()), default=0)
    daemon = Daemon(tmp_path, write_slurm_config(tmp_path, mode, land))
    try:
        client = daemon.start()
        # thorough: the winner rule waits for every catalog profile (none may be lost).
        # Kept: the arms are read back after the sweep (by default its end removes them).
        sweep_id = int(client.submit({**SPEC, "profiles": profiles, "stop": "thorough",
                                      "keep_profiles": True})["id"])
        await _until_mid_wave(client, sweep_id)
        daemon.kill()  # SIGKILL: no clean-up of any kind
        planned = {r["label"] for r in _planned(tmp_path)}
        client = daemon.start()
        shown = _until_ended(client, sweep_id)
    finally:
        daemon.kill()
    assert shown["state"] == "done", shown["reason"]
    # pag (+10 %) wins; a neutral profile stacked on it may ride along within the noise.
    assert "pag" in str((shown["verdict"] or {}).get("recipe")).split("+"), shown["verdict"]
    runs, jobs = shown["run_list"], shown["jobs"]
    # No duplicate: one job per run, each scheduler id once, each token once on Slurm.
    per_run: dict[int, int] = {}
    for j in jobs:
        per_run[j["run_id"]] = per_run.get(j["run_id"], 0) + 1
    assert all(n == 1 for n in per_run.values()), per_run
    ids = [str(j["backend_id"]) for j in jobs]
    assert len(ids) == len(set(ids))
    ours = [(jid, tok) for jid, tok in slurm_jobs() if jid > before]
    tokens = [tok for _, tok in ours]
    assert None not in tokens and len(tokens) == len(set(tokens)), ours
    assert sorted(str(jid) for jid, _ in ours) == sorted(ids)
    # No lost profile: every run planned before the kill ended measured, and every
    # profile of the catalog was measured.
    by_label = {r["label"]: r for r in runs}
    assert planned <= set(by_label)
    assert all(by_label[label]["outcome"] == "pass" for label in planned), \
        [(label, by_label[label]["state"]) for label in planned]
    measured = {r["params"]["profile"] for r in runs if r["outcome"] == "pass"}
    assert {p["name"] for p in profiles} <= measured
    if mode == "submit_sh":
        repo = tmp_path / "maxtext-slurm"
        names = [a.name for a in te.arms((repo / "train_env.sh").read_text())]
        assert len(names) == len(set(names)), names
        assert {p["name"] for p in profiles} <= set(names)
