"""A failure at a batch below one that already ran says nothing about memory (memory grows
with the batch): it must not cap the search. Here a one-off compile hang at 12 (counted as
an OOM, as the SKILL.md says) came after 14 had run, and the search stopped at 14 without
trying 13, the true peak."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.kinds.model_perf.rules import CONTRADICTION_RERUN
from tests.golden_files import GOLDEN, check_golden
from tests.simrun import perf_spec, recorded, run, sim_config, write_scenario


async def sweep(tmp_path: Path, fault: dict[str, object], peak: int,
                nodes: str) -> tuple[dict[str, Any], list[str], list[tuple[str, str | None]]]:
    """One model perf sweep on the simulated cluster (largest fit 14) with `fault`: its
    verdict, the rules of its events, and each run's label and outcome."""
    return await _run(tmp_path, [fault], {"max_batch": 14, "peak_batch": peak,
                                          "peak_tgs": 1400}, nodes)


def standing(verdict: dict[str, Any]) -> str:
    """The verdict's one `standing` caveat (failures that stand beside a pass): its text."""
    (text,) = [c["text"] for c in verdict["caveats"] if c["kind"] == "standing"]
    return str(text)


async def _run(tmp_path: Path, faults: list[dict[str, object]], model: dict[str, int],
               nodes: str) -> tuple[dict[str, Any], list[str], list[tuple[str, str | None]]]:
    scenario = write_scenario(tmp_path, faults=faults, models={"llama2-70b": model})
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, perf_spec(nodes=nodes))
    assert code == EXIT_VERDICT, lines
    verdict, rules, runs = await recorded(config)
    assert verdict is not None
    return verdict, rules, runs


async def test_a_one_off_failure_below_a_pass_does_not_cap_the_search(tmp_path: Path) -> None:
    fault: dict[str, object] = {"kind": "hang", "phase": "compile", "model": "llama2-70b",
                                "batch": 12, "times": 1}
    verdict, _, runs = await sweep(tmp_path, fault, peak=13, nodes="chi[2832,2867-2868]")
    assert verdict["best"] == 13, (verdict, runs)


async def _hang_at_4(tmp_path: Path, times: int | None) -> tuple[dict[str, Any], list[str]]:
    """A compile hang at the first probe (4), above every pass so far: SKILL.md calls it a
    silent OOM and never retries it, yet the passes' compiled memory says 4 fits with room
    (the truth: 16 fits, the peak is 10)."""
    fault: dict[str, object] = {"kind": "hang", "phase": "compile", "model": "llama2-70b",
                                "batch": 4}
    if times is not None:
        fault["times"] = times
    verdict, rules, _ = await sweep(tmp_path, fault, peak=10, nodes="chi[2832,2863,2867-2868]")
    return verdict, rules


async def test_a_silent_failure_the_memory_line_says_fits_is_run_again(tmp_path: Path) -> None:
    verdict, rules = await _hang_at_4(tmp_path, times=1)
    assert verdict["best"] == 10, verdict
    assert CONTRADICTION_RERUN.id in rules


async def test_one_that_fails_again_stands_and_the_verdict_says_so(tmp_path: Path) -> None:
    verdict, rules = await _hang_at_4(tmp_path, times=None)
    assert verdict["best"] == 3 and rules.count(CONTRADICTION_RERUN.id) == 1
    check_golden(GOLDEN / "failure_below_a_pass" / "hang_twice_stands.txt",
                 standing(verdict) + "\n")



async def _at_the_top(tmp_path: Path, faults: list[dict[str, object]]
                      ) -> tuple[dict[str, Any], list[tuple[str, str | None]]]:
    """The red-team cell: on 4 nodes the largest fit is 18 and the peak is there."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    verdict, _, runs = await _run(tmp_path, faults, {
        "max_batch": 18, "peak_batch": 18, "peak_tgs": 1400, "nodes": 4},
        "chi[2832,2863,2867-2868]")
    return verdict, runs


async def test_a_one_off_oom_at_the_largest_fit_is_named_in_the_verdict(tmp_path: Path) -> None:
    """The peak at the largest fit (18), one OOM there that the memory did not call for.
    SKILL.md never re-runs an OOM, so 17 wins (3 % slow); the verdict said nothing. It
    now says 18 may be a one-off."""
    fault: dict[str, object] = {"kind": "oom", "model": "llama2-70b", "batch": 18, "times": 1}
    verdict, runs = await _at_the_top(tmp_path, [fault])
    assert ("per_device_batch_size=18", "oom") in runs, runs
    check_golden(GOLDEN / "failure_below_a_pass" / "one_off_oom_at_the_largest_fit.txt",
                 standing(verdict) + "\n")


async def test_no_one_off_is_named_without_an_oom(tmp_path: Path) -> None:
    verdict, runs = await _at_the_top(tmp_path, [])
    assert verdict["best"] == 18, runs
    assert "ran out of memory though" not in str(verdict.get("caveat")), verdict


async def test_once_a_silent_failure_stood_another_above_the_passes_stands_at_once(
        tmp_path: Path) -> None:
    """Red team: persistent compile hangs from 35 up, every batch: each new value was
    re-run once though the memory line had already proved wrong up there (10 runs; a
    plateau case spent 5 of its 12 runs so and ran out). The first that fails twice
    shows the line wrong; the next stands at once, and the verdict says which."""
    verdict, rules, runs = await _run(tmp_path, [
        {"kind": "hang", "phase": "compile", "model": "llama2-70b", "batch": b}
        for b in range(12, 41)], {"max_batch": 40, "peak_batch": 11, "peak_tgs": 1400},
        "chi[2832,2863,2867-2868]")
    assert verdict is not None and verdict["best"] == 11, (verdict, runs)
    assert rules.count(CONTRADICTION_RERUN.id) == 1, runs
    check_golden(GOLDEN / "failure_below_a_pass" / "second_silent_failure_stands_at_once.txt",
                 standing(verdict) + "\n")
