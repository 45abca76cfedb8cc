"""Node perf, network health and model sweeps end to end on the local real Slurm cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.kinds.spec import SpecError
from tests.simrun import open_store, run, write_scenario
from tests.slurm_sweep import direct_config

pytestmark = pytest.mark.slurm

FOUR = "chi[2832,2863,2867-2868]"


@pytest.mark.timeout(300)   # eight 1-node jobs on real Slurm: ~80 s on a loaded machine
async def test_node_perf_finds_the_slow_node(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003, nodes={"chi2863": {"speed": 0.9}})
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "node-perf", "nodes": FOUR})
    assert code == EXIT_VERDICT, lines
    report = "\n".join(lines)
    assert "| chi2863 |" in report and "DEGRADED" in report
    assert "-w chi[2832,2867-2868]" in report


async def test_network_finds_the_bad_link(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003,
                              links=[{"a": "chi2832", "b": "chi2868", "factor": 0.85}])
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "network", "nodes": FOUR,
                                     "expected_tgs": _one_node_tgs(scenario)})
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        verdict = (await store.sweeps.get(1)).verdict
    finally:
        await store.close()
    assert verdict is not None, lines
    assert [(f["kind"], sorted(f["nodes"])) for f in verdict["faults"]] == [
        ("link", ["chi2832", "chi2868"])], verdict["faults"]
    # The verdict's diagnosis is what the run says.
    assert verdict["faults"][0]["diagnosis"] in "\n".join(lines)


async def test_model_sweep_flags_the_regression(tmp_path: Path,
                                                slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.003,
                              commits={"cand": {"llama2-70b": {"tgs_factor": 0.9}}})
    config = direct_config(tmp_path, scenario)
    code, lines = await run(config, {"kind": "model-sweep", "nodes": FOUR, "steps": 15,
                                     "commits": ["main", "cand"],
                                     "matrix": {"llama2-70b": [1, 2]}})
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        assert sweep.verdict is not None
        regressions = sweep.verdict["evaluation"]["regressions"]
        assert sorted(r["key"] for r in regressions) == ["llama2-70b 1N", "llama2-70b 2N"]
    finally:
        await store.close()


async def test_a_node_slurm_does_not_have_is_refused_at_submit(tmp_path: Path,
                                                             slurm_env: dict[str, str]) -> None:
    config = direct_config(tmp_path, write_scenario(tmp_path, time_scale=0.003))
    with pytest.raises(SpecError, match=r"not nodes of this cluster: chi9001"):
        await run(config, {"kind": "node-perf", "nodes": "chi[2832,2863,9001]"})
    store = await open_store(config)
    try:
        assert await store.sweeps.all() == []   # nothing recorded
    finally:
        await store.close()


def _one_node_tgs(scenario: Path) -> float:
    from sweepd.sim.scenario import load_scenario
    from sweepd.sim.truth import default_batch, true_outcome

    sc = load_scenario(scenario)
    batch = default_batch(sc, "llama2-70b", 1)
    return true_outcome(sc, "llama2-70b", ["chi2863"], {"per_device_batch_size": str(batch)},
                        {}, None).tgs


async def test_model_sweep_submits_each_commit_from_its_own_checkout(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    """Each commit runs from a clone submit.sh takes for a repo root; the logs land in the
    person's outputs/; when the sweep ends nothing sweepd made is left."""
    import os
    import subprocess

    from tests.slurm_sweep import submit_sh_config

    scenario = write_scenario(tmp_path, time_scale=0.003)
    config = submit_sh_config(tmp_path, scenario)
    repo = config.cluster.slurm.repo
    assert repo is not None

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                               "user.email=t@t", *args], check=True, text=True,
                              capture_output=True).stdout.strip()

    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    (repo / "CHANGES").write_text("candidate\n")
    git("add", "-A")
    git("commit", "-qm", "candidate")
    cand = git("rev-parse", "HEAD")
    (repo / "uncommitted.txt").write_text("a person's work in progress\n")

    code, lines = await run(config, {"kind": "model-sweep", "nodes": FOUR, "repo": str(repo),
                                     "commits": [base, cand], "matrix": {"llama2-70b": [1]}})
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        events = await store.events.of_sweep(1)
    finally:
        await store.close()
    assert len(jobs) == 2
    for job, has_changes in zip(jobs, (False, True), strict=True):
        log = Path(job.log_path or "")
        assert log.parent == repo / "outputs" and "Status: SUCCESS" in log.read_text()
        # submit.sh took the checkout for the repo root: it snapshotted that commit alone.
        link = os.readlink(log.with_suffix("") / "artifact")
        assert link.startswith("../.artifacts/artifact_") and link.count("/") == 2
        snapshot = log.parent / link[3:]
        assert (snapshot / "submit.sh").exists()
        assert (snapshot / "CHANGES").exists() == has_changes
    # Nothing sweepd made is left: no checkout, nothing registered in the person's repo.
    assert not (config.daemon.outputs / "sweep-1" / "worktrees").exists()
    assert any(e.rule == "checkouts.released" for e in events)
    assert git("worktree", "list", "--porcelain").count("worktree ") == 1
    # The person's checkout: same branch, same commit, work in progress untouched.
    assert git("rev-parse", "HEAD") == cand
    assert git("status", "--porcelain") == "?? uncommitted.txt"
