"""On the local real Slurm cluster in submit.sh mode: an xla-tuning sweep removes the
TUNE_PROFILE arms it wrote into the toolkit's train_env.sh when it ends (done, aborted,
cancelled), records and says what it removed; `keep_profiles: true` leaves them, and the
report says so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sweepd.app.daemon import open_parts
from sweepd.app.foreground import EXIT_VERDICT
from sweepd.clusters import train_env as te
from sweepd.kinds.spec import SpecError
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, run
from tests.slurm_sweep import submit_sh_config
from tests.support.slurm import SPEC, scenario, through_train_sh
from tests.support.slurm_campaign import SPEC as CAMPAIGN

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
        # The same record whichever way the sweep ended.
        check_golden(GOLDEN / "slurm_profiles_cleanup" / "removed.txt",
                     scrubbed(f"{removed.reason}\n", repo=repo))
        report: dict[str, Any] = await parts.service.report(sweep_id)
        assert removed.reason in report["markdown"], report["markdown"][-2000:]


async def test_a_done_sweep_gives_train_env_sh_back(slurm_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    config = submit_sh_config(tmp_path, scenario(tmp_path))
    repo = through_train_sh(config)
    original = (repo / "train_env.sh").read_text()
    spec = {**SPEC, "profiles": SPEC["profiles"][:1]}
    code, lines = await run(config, spec)
    text = "\n".join(lines)
    assert code == EXIT_VERDICT, text
    assert (repo / "train_env.sh").read_text() == original
    # What the run says of train_env.sh (the report's table beside it holds job ids): its
    # arms removed, then the file found clean, and the report's "In your files" again.
    said = scrubbed("".join(f"{line}\n" for line in text.splitlines()
                            if "train_env.sh" in line), repo=repo)
    # How many arms the sweep wrote depends on how far its waves got before the verdict
    # (3 or 4 on a loaded machine): the wording is the golden's, the count and names not.
    said = re.sub(r"removed the sweep's \d+ TUNE_PROFILE arm\(s\) from (\S+) \([^)]*\)",
                  r"removed the sweep's <n> TUNE_PROFILE arm(s) from \1 (<arms>)", said)
    check_golden(GOLDEN / "slurm_profiles_cleanup" / "done_lines.txt", said)
    store = await open_store(config)
    try:
        rules = [e.rule for e in await store.events.of_sweep(1)]
    finally:
        await store.close()
    assert rules.count("cluster.leftover_removed") == 1


async def test_a_campaign_whose_flags_stage_meets_leftover_arms_is_refused_at_once(
        slurm_env: dict[str, str], tmp_path: Path) -> None:
    # The arms an earlier sweep left (kept, or written before sweeps removed theirs): the
    # flags stage's pre-flight would refuse them hours in; the campaign is refused first.
    config = submit_sh_config(tmp_path, scenario(tmp_path))
    repo = config.cluster.slurm.repo
    assert repo is not None
    te.apply(repo / "train_env.sh",
             te.arm("old", ["--xla_gpu_enable_latency_hiding_scheduler=true"]))
    spec = {**CAMPAIGN, "nodes": "chi[2867-2868,2880-2881]"}
    async with open_parts(config) as parts:
        refusals: dict[str, str] = {}
        for verb in (parts.service.validate, parts.service.submit):
            with pytest.raises(SpecError) as refused:
                await verb(spec)
            assert "stage flags: " in str(refused.value), refused.value
            refusals[verb.__name__] = scrubbed(str(refused.value), repo=repo)
        check_golden_cases(GOLDEN / "slurm_profiles_cleanup" / "leftover_refusals.txt", refusals)
        assert await parts.store.sweeps.all() == []
        assert await parts.store.jobs.of_sweep(1) == []
        # Without the arms, the same campaign is admitted (validate: nothing recorded).
        te.clean(repo / "train_env.sh")
        shown = await parts.service.validate(spec)
        assert any(c["text"].startswith("stage flags: ") and c["ok"]
                   for c in shown["preflight"]), shown["preflight"]
