"""On the local real Slurm cluster: a partition that does not exist is refused by `check`
and `validate` in one line naming the partitions that do, before any sweep; a submission
submit.sh refuses stops the sweep with a one-line status (the cause), its whole output in
the evidence; a dry job that failed says its cause in check's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.check import read_dry_log, run_checks
from sweepd.app.daemon import open_parts
from sweepd.config import Config
from sweepd.core.states import SweepState
from sweepd.kinds.spec import SpecError
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, perf_spec, write_scenario
from tests.slurm_sweep import direct_config, submit_sh_config

pytestmark = pytest.mark.slurm


def with_partition(config: Config, partition: str) -> Config:
    slurm = config.cluster.slurm.model_copy(update={"partition": partition})
    return config.model_copy(update={"cluster": config.cluster.model_copy(
        update={"slurm": slurm})})


async def test_check_refuses_a_partition_the_cluster_does_not_have(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = with_partition(direct_config(tmp_path, write_scenario(tmp_path), **{
        "daemon.socket": str(tmp_path / "s.sock")}), "gpu")
    said: list[str] = []
    failures = await run_checks(config, said.append)
    [line] = [s for s in said if s.startswith("FAIL partition")]
    assert failures == 1, said
    said.clear()
    assert await run_checks(with_partition(config, "debug"), said.append) == 0, said
    [known] = [s for s in said if s.startswith("ok   partition")]
    check_golden_cases(GOLDEN / "slurm_partition" / "check_lines.txt",
                       {"unknown partition": line, "known partition": known})


async def test_validate_and_submit_refuse_an_unknown_partition(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = with_partition(direct_config(tmp_path, write_scenario(tmp_path)), "gpu")
    async with open_parts(config) as parts:
        refusals: dict[str, str] = {}
        for verb in (parts.service.validate, parts.service.submit):
            with pytest.raises(SpecError) as refused:
                await verb(perf_spec(values=[4]))
            refusals[verb.__name__] = str(refused.value)
        check_golden_cases(GOLDEN / "slurm_partition" / "admission_refusals.txt", refusals)
        assert await parts.store.sweeps.all() == []


async def test_a_refused_submission_stops_with_one_status_line(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    # The sweep gets past admission (created in the store as an older sweepd let it), and
    # submit.sh's sbatch refuses the partition.
    config = with_partition(submit_sh_config(tmp_path, write_scenario(tmp_path)), "gpu")
    async with open_parts(config) as parts:
        sweep_id = await parts.store.sweeps.create("model-perf", "t", perf_spec(values=[4]))
        for _ in range(5):
            await parts.engine.step()
            sweep = await parts.store.sweeps.get(sweep_id)
            if sweep.state == SweepState.AWAITING_DECISION:
                break
        assert sweep.state == SweepState.AWAITING_DECISION
        assert "\n" not in sweep.reason and "\\n" not in sweep.reason, sweep.reason
        check_golden(GOLDEN / "slurm_partition" / "refused_status.txt", f"{sweep.reason}\n")
    store = await open_store(config)
    try:
        events = await store.events.of_sweep(sweep_id)
        [stop] = [e for e in events if e.to_state == SweepState.AWAITING_DECISION]
        assert stop.evidence and "\n" in stop.evidence   # submit.sh's whole output
        # The scheduler's refusal, not the spec's: a resume may get past it.
        assert stop.rule == "submit.refused"
        [job] = [e for e in events if e.job_id is not None and e.to_state == "failed"]
        assert job.rule == "submit.refused" and job.evidence == stop.evidence
    finally:
        await store.close()


def test_a_failed_dry_job_says_its_cause(tmp_path: Path) -> None:
    log = tmp_path / "1-JAX.log"
    log.write_text("JOB_ID=1\n0: ERROR: SIM_PYTHON: set SIM_PYTHON to the trainer's python\n"
                   "=================== JOB SUMMARY ===================\n"
                   "  Status: FAILED (exit 1)\n"
                   "===================================================\n")
    line = read_dry_log("1", log)
    assert (line.name, line.ok) == ("dry job", False), line
    check_golden(GOLDEN / "slurm_partition" / "dry_job_cause.txt",
                 scrubbed(f"{line.detail}\n", tmp=tmp_path))
