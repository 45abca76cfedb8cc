"""Issue 21 (what issue 14's note left): the evidence run's HLO dump lands in the sweep's own
directory in direct mode, and the gather reads the Wave 1.5 evidence from it there. The
batch script's `OUTPUT_PATH` export is tested as text elsewhere
(`test_direct_mode_gives_the_job_its_own_output_path_beside_the_log`); this runs a whole
sweep on the simulated cluster and looks for the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.kinds.xla_tuning.evidence.jobfacts import DUMP_DIR
from sweepd.kinds.xla_tuning.sim.hlo import FILE_NAME
from tests.support.xla_sim import FAST, landscape, spec, sweep_on_sim

# The evidence run's step as the dump shows it: all-gather dominates (so the catalog's
# order starts there), compute the rest.
SHARES = {"all-gather (DCN)": 0.42, "reduce-scatter (DCN)": 0.18, "compute": 0.40}


async def _sweep(tmp_path: Path) -> tuple[Path, dict[str, object], str, str]:
    land = landscape(effects={f"{FAST}=true": {"tgs": 1.10}}, evidence=SHARES)
    code, swept, config = await sweep_on_sim(
        tmp_path, land, spec([{"name": "fast", "settings": {FAST: "true"}}]))
    assert code == EXIT_VERDICT, swept.progress()[-5:]
    [job] = swept.jobs_of("evidence")
    assert job.backend_id and job.job_name and job.log_path, job
    sweep_dir = config.daemon.outputs / f"sweep-{swept.sweep.id}"
    return sweep_dir, dict(job.facts), f"{job.backend_id}-{job.job_name}", job.backend_id


async def test_the_evidence_runs_hlo_dump_lands_in_the_sweeps_directory(
        tmp_path: Path) -> None:
    sweep_dir, facts, job_dir, job_id = await _sweep(tmp_path)
    dump = sweep_dir / job_dir / DUMP_DIR / FILE_NAME
    assert dump.is_file(), sorted(str(p) for p in sweep_dir.rglob("*"))
    assert dump.read_text().startswith("HloModule jit_train_step")
    # The gather found it there and read the evidence from it (not from the landscape).
    assert facts["dump"] == str(dump)
    evidence = facts["evidence"]
    assert isinstance(evidence, dict), facts
    assert evidence["source"] == f"HLO dump of job {job_id}"
    shares = dict(evidence["shares"])
    assert shares["all-gather (DCN)"] > shares["reduce-scatter (DCN)"] > 0, shares
    # Nothing was dumped where the daemon happened to run.
    assert not list(Path.cwd().glob(f"outputs/{job_id}*"))


async def test_a_stray_output_path_in_the_daemons_environment_does_not_move_the_dump(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A person's shell may carry OUTPUT_PATH from an earlier job; direct mode's batch script
    # exports the sweep's own directory over it (`render_batch_script`).
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("OUTPUT_PATH", str(elsewhere))
    sweep_dir, facts, job_dir, _ = await _sweep(tmp_path)
    dump = sweep_dir / job_dir / DUMP_DIR / FILE_NAME
    assert dump.is_file(), sorted(str(p) for p in tmp_path.rglob("*xla_dump*"))
    assert facts["dump"] == str(dump)
    assert not elsewhere.exists() or not list(elsewhere.rglob(FILE_NAME))
