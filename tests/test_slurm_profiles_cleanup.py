"""On the local real Slurm cluster in submit.sh mode: an xla-tuning sweep removes the
TUNE_PROFILE arms it wrote into the toolkit's train_env.sh when it ends (done, aborted,
cancelled), records and says what it removed; `keep_profiles: true` leaves them, and the
report says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweepd.app.daemon import open_parts
from sweepd.clusters import train_env as te
from tests.slurm_sweep import submit_sh_config
from tests.test_slurm_xla_sweep import SPEC, scenario

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("end", ["abort", "cancel"])
async def test_an_ended_sweep_leaves_no_arms_in_train_env_sh(
        slurm_env: dict[str, str], tmp_path: Path, end: str) -> None:
    config = submit_sh_config(tmp_path, scenario(tmp_path))
    repo = config.cluster.slurm.repo
    assert repo is not None
    original = (repo / "train_env.sh").read_text()
    async with open_parts(config) as parts:
        sweep_id = int((await parts.service.submit(SPEC))["id"])
        await parts.engine.step()        # wave 1 submitted: its arms written
        assert te.arms((repo / "train_env.sh").read_text()), "no arm was written"
        await getattr(parts.service, end)(sweep_id)
        assert (repo / "train_env.sh").read_text() == original
        events = await parts.store.events.of_sweep(sweep_id)
        [removed] = [e for e in events if e.rule == "cluster.leftover_removed"]
        assert removed.reason.startswith("removed the sweep's 2 TUNE_PROFILE arm(s) from "
                                         f"{repo / 'train_env.sh'} (restore_default, evidence)"), removed
        report: dict[str, Any] = await parts.service.report(sweep_id)
        assert removed.reason in report["markdown"], report["markdown"][-2000:]
