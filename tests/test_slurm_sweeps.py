"""Model perf sweeps end to end on the local real Slurm cluster, in both submission modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.config import Config
from sweepd.core.states import JobState
from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_max_batch
from sweepd.util.hostlists import expand_nodes
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_sweep import direct_config, submit_sh_config

pytestmark = pytest.mark.slurm

NODES = "chi[2832,2863]"


async def _sweep(config: Config, scenario: Path) -> None:
    cliff = true_max_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES))
    code, lines = await run(config, perf_spec(nodes=NODES, values=[4, cliff + 1]))
    assert code == EXIT_VERDICT, lines
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs = {r.label: r for r in await store.runs.of_sweep(sweep.id)}
        assert runs["per_device_batch_size=4"].outcome == "pass"
        assert runs["per_device_batch_size=4"].tgs
        assert runs[f"per_device_batch_size={cliff + 1}"].outcome == "oom"
        assert sweep.verdict is not None and sweep.verdict["best"] == 4
        jobs = await store.jobs.of_sweep(sweep.id)
        assert [j.state for j in jobs] == [JobState.DONE, JobState.FAILED]
        log = Path(jobs[0].log_path or "").read_text()
        # Multi-node: both ranks' lines carry the `srun -l` prefix; rank 0 is the truth.
        assert "\n0: completed step: 14," in log and "\n1: completed step: 14," in log
        assert f"{jobs[0].backend_id}-" in Path(jobs[0].log_path or "").name
        assert len(await store.jobs.steps(jobs[0].id)) == 15
        assert jobs[1].failure_class == "oom" and jobs[1].failure_detail
    finally:
        await store.close()


async def test_model_perf_sweep_direct_mode(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.004)
    await _sweep(direct_config(tmp_path, scenario), scenario)


async def test_model_perf_sweep_submit_sh_mode(tmp_path: Path,
                                               slurm_env: dict[str, str]) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.004)
    config = submit_sh_config(tmp_path, scenario)
    await _sweep(config, scenario)
    repo = config.cluster.slurm.repo
    assert repo is not None and any((repo / "outputs").glob("*-JAX-llama2-70b-*.log"))


async def test_submit_sh_mode_as_the_toolkit_really_behaves(
        tmp_path: Path, slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """JOB_WORKSPACE outside the repo, and an sbatch whose output is lost (submit.sh then
    prints no job id): every job is adopted from the queue by its token, with an event,
    and judged from its log where the scheduler says it is."""
    from tests.support.slurm import sbatch_shim

    ws = tmp_path / "shared-jobs"
    monkeypatch.setenv("JOB_WORKSPACE", str(ws))
    monkeypatch.setenv("PATH", sbatch_shim(tmp_path, "silent")["PATH"])
    scenario = write_scenario(tmp_path, time_scale=0.004)
    config = submit_sh_config(tmp_path, scenario)
    await _sweep(config, scenario)
    store = await open_store(config)
    try:
        jobs = await store.jobs.of_sweep(1)
        adopted = [e for e in await store.events.of_sweep(1) if e.rule == "submit.adopted"]
    finally:
        await store.close()
    assert all(Path(j.log_path or "").parent == ws for j in jobs)
    assert sorted(e.job_id for e in adopted) == sorted(j.id for j in jobs)
    assert all("printed no job id" in (e.evidence or "") for e in adopted)


async def test_a_stop_in_submit_sh_mode_points_at_the_logs_where_they_are(
        tmp_path: Path, slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """submit.sh writes logs to the person's JOB_WORKSPACE, not to sweepd's state: the stop
    message's Artifacts line names where the job's log really is."""
    from sweepd.app.foreground import EXIT_AWAITING_DECISION

    ws = tmp_path / "shared-jobs"
    monkeypatch.setenv("JOB_WORKSPACE", str(ws))
    scenario = write_scenario(tmp_path, faults=[{"kind": "config_error"}], time_scale=0.004)
    config = submit_sh_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(nodes=NODES, values=[4]))
    assert code == EXIT_AWAITING_DECISION, lines
    store = await open_store(config)
    try:
        [job] = await store.jobs.of_sweep(1)
        [stop] = [e.reason for e in await store.events.of_sweep(1, kind="progress")
                  if "STOP]" in e.reason]
    finally:
        await store.close()
    log = Path(job.log_path or "")
    assert log.parent == ws and log.exists()
    assert f"Artifacts: {ws}/{job.backend_id}-*" in stop.splitlines(), stop
    assert str(config.daemon.outputs) not in stop
