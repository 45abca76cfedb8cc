"""Whole xla-tuning sweeps on the simulated cluster (engine + real store + the simulator's
flag-effect trainer), each on a small landscape of its own: every stop rule is reached
(a confirmed proposal, "structurally bounded", the 8 h timebox), an unknown flag and an
OOM drop their profiles at once, and the progress messages go out as the SKILL.md asks."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.core.states import SweepState
from sweepd.kinds.xla_tuning.evidence.results import Outcome
from sweepd.kinds.xla_tuning.runs import gather
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.simrun import open_store, run, sim_config
from tests.support.xla_sim import (
    FAST,
    Swept,
    env_profile,
    landscape,
    spec,
    sweep_on_sim,
    write_tuning_scenario,
)

TYPO = "xla_gpu_enable_async_all_gather"
BIG = "xla_gpu_all_gather_combine_threshold_bytes"


async def test_a_confirmed_winner_ends_with_a_proposal_and_bad_profiles_are_dropped(
        tmp_path: Path) -> None:
    land = landscape(effects={f"{FAST}=true": {"tgs": 1.10},
                              f"{BIG}=4294967296": {"tgs": 1.2, "mem": 3.0}},
                     unknown=[TYPO])
    profiles = [{"name": "fast", "settings": {FAST: "true"}},
                {"name": "typo", "settings": {TYPO: "true"}},
                {"name": "big", "settings": {BIG: "4294967296"}},
                env_profile(1), env_profile(2)]
    code, swept, _ = await sweep_on_sim(tmp_path, land, spec(profiles))
    assert code == EXIT_VERDICT, swept.progress()[-5:]
    assert swept.sweep.state == SweepState.DONE
    verdict = swept.sweep.verdict or {}
    assert (verdict["kind"], verdict["rule"], verdict["recipe"]) == ("proposal", "stop.winner",
                                                                     "fast")
    assert verdict["gain"] > 0.05
    # Confirmed, never one run: the winner ran at least twice.
    assert len([j for j in swept.jobs_of("fast") if j.tgs]) >= 2
    # The unknown flag: one job, dropped at once, the flag named; never retried.
    typo = swept.jobs_of("typo")
    assert len(typo) == 1 and typo[0].failure_class == "unknown_flag"
    assert TYPO in (typo[0].failure_detail or "")
    # The OOM: one job, dropped, the allocation recorded.
    big = swept.jobs_of("big")
    assert len(big) == 1 and big[0].failure_class == "oom"
    assert "GiB" in (big[0].failure_detail or "")
    # Telegram: the kickoff first, each positive result once (sent at once: `— PASS`), the
    # failures as `— FAIL` lines (sent at once), the end.
    said = swept.progress()
    positive = [line for line in said if "positive result:" in line]
    assert [line.split()[3] for line in positive] == ["fast"], positive
    assert "(1 run: job " in positive[0]
    # The measured figures and job ids vary with the noise: the wording, numbers out.
    check_golden_cases(GOLDEN / "xla_sweep_sim" / "progress.txt", {
        "kickoff": said[0], "positive result": re.sub(r"\d+(\.\d+)?", "#", positive[0])})
    assert any(line.endswith("— FAIL") and "typo" in line for line in said)
    assert said[-1].startswith("proposal: fast +")


async def test_25_profiles_none_above_2_percent_is_structurally_bounded(tmp_path: Path) -> None:
    land = landscape(effects={"NCCL_KNOB_03=1": {"tgs": 1.01}})  # +1 %: below the +2 % bar
    # 26 profiles of ~20 min each pass 8 h of queue: the timebox is moved out of the way.
    the_spec = spec([env_profile(i) for i in range(26)], thresholds={"max_queue_hours": 48})
    code, swept, _ = await sweep_on_sim(tmp_path, land, the_spec)
    assert code == EXIT_VERDICT, swept.progress()[-5:]
    verdict = swept.sweep.verdict or {}
    assert (verdict["kind"], verdict["rule"]) == ("bounded", "stop.bounded"), verdict
    tried = {r.params.profile for r in swept.runs if r.params.labels.get("wave") not in (None, "1")}
    assert len(tried) >= 25
    assert "structurally bounded" in (swept.sweep.reason or "")
    # The midpoint is said once: half the 25 profiles tried.
    mid = [line for line in swept.progress() if line.startswith("[xla-tuning] midpoint: ")]
    assert len(mid) == 1, mid
    half = int(mid[0].split()[2])
    assert 13 <= half < 25 and "of 25 profiles tried" in mid[0]
    assert not [line for line in swept.progress() if "positive result:" in line]


async def test_8_hours_of_queue_time_ends_the_sweep_with_what_it_has(tmp_path: Path) -> None:
    # 15 steps of ~570 s: a job takes ~2.5 h of cluster time; the fourth one passes 8 h.
    land = landscape(base_tgs={"default": 50.0}, step_s_at_base=573.0,
                     effects={f"{FAST}=true": {"tgs": 1.03}})
    profiles = [{"name": "fast", "settings": {FAST: "true"}}] + [env_profile(i)
                                                                 for i in range(20)]
    code, swept, _ = await sweep_on_sim(tmp_path, land, spec(profiles), time_scale=0.0002)
    assert code == EXIT_VERDICT, swept.progress()[-5:]
    verdict = swept.sweep.verdict or {}
    assert (verdict["kind"], verdict["rule"]) == ("timebox", "stop.timebox"), verdict
    assert "h of queue time >= 8 h" in verdict["reason"]
    assert len(swept.jobs) < 21  # far from the whole catalog
    mid = [line for line in swept.progress() if line.startswith("[xla-tuning] midpoint: ")]
    assert len(mid) == 1 and "h of queue time" in mid[0], swept.progress()


async def test_a_profile_the_env_file_overrides_is_not_applied_never_measured(
        tmp_path: Path) -> None:
    """The model's env file, sourced last, sets the profile's flag back: the job's printed
    effective XLA_FLAGS show it, so the profile is "not applied" with the culprit named,
    never a measured result (though its job ran and had a TGS)."""
    land = landscape(effects={f"{FAST}=true": {"tgs": 1.10}}, deployed=[f"{FAST}=false"])
    scenario = write_tuning_scenario(tmp_path, land)
    data = yaml.safe_load(scenario.read_text())
    data["tuning"]["env_file_last"] = True
    scenario.write_text(yaml.safe_dump(data))
    config = sim_config(tmp_path, scenario)
    code, _ = await run(config, spec([{"name": "fast", "settings": {FAST: "true"}},
                                      env_profile(1)]))
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        runs, jobs = await store.runs.of_sweep(sweep.id), await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    assert code == EXIT_VERDICT
    results = gather.results(runs, jobs)
    fast = [r for r in results if r.profile == "fast"]
    assert fast and all(r.outcome is Outcome.NOT_APPLIED for r in fast)
    check_golden_cases(GOLDEN / "xla_sweep_sim" / "env_file_overrides.txt", {
        "not applied": scrubbed(fast[0].detail, tmp=tmp_path)})
    assert all(j.tgs for j in jobs if j.run_id in {r.id for r in runs
                                                    if r.params.profile == "fast"})
    assert (sweep.verdict or {}).get("recipe") != "fast"


@contextmanager
def machine_loaded(workers: int = 3) -> Iterator[None]:
    """Busy-loop processes for the block's duration: the trainers run slower than their
    plans on the machine's clock, as on a loaded CI runner."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(workers)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def what_ran(swept: Swept) -> list[tuple[str, str, float | None]]:
    labels = {r.id: r.label for r in swept.runs}
    return [(labels[j.run_id], str(j.state), j.tgs) for j in sorted(swept.jobs,
                                                                      key=lambda j: j.id)]


async def test_the_same_scenario_gives_the_same_sweep_however_loaded_the_machine_is(
        tmp_path: Path) -> None:
    """Issue 21 item 5: the time rules read the simulated cluster's clock (each job's
    planned duration from its start), not when the engine noticed, so a loaded machine
    changes neither the jobs nor the verdict of an 8 h timeboxed sweep."""
    land = landscape(base_tgs={"default": 50.0}, step_s_at_base=573.0,
                     effects={f"{FAST}=true": {"tgs": 1.03}})
    profiles = [{"name": "fast", "settings": {FAST: "true"}}] + [env_profile(i)
                                                                 for i in range(20)]
    (tmp_path / "idle").mkdir()
    (tmp_path / "loaded").mkdir()
    code, idle, _ = await sweep_on_sim(tmp_path / "idle", land, spec(profiles),
                                       time_scale=0.0002)
    with machine_loaded():
        code_loaded, loaded, _ = await sweep_on_sim(tmp_path / "loaded", land, spec(profiles),
                                                    time_scale=0.0002)
    assert code == code_loaded == EXIT_VERDICT, loaded.progress()[-5:]
    assert (idle.sweep.verdict or {}).get("rule") == "stop.timebox"
    assert what_ran(loaded) == what_ran(idle)
    # The same verdict (its Inventory line names each run's own scenario file).
    assert {**(loaded.sweep.verdict or {}), "inventory": ""} == \
        {**(idle.sweep.verdict or {}), "inventory": ""}
    # Every job's share of the 8 h is its planned time on the cluster's clock.
    shares = [gather.queue_time(s.jobs) for s in (idle, loaded)]
    assert shares[0] == shares[1] and len(shares[0]) == len(idle.jobs)
