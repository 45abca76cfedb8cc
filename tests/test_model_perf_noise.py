"""Run-to-run noise above what the batch search's rules assume (a red-team check: at 1.6-3.8 %
run noise, 11 of 20 sweeps were 1.6-5.2 % off the true peak, no caveat). Each passed job's
steady steps give the standard error of its TGS (`model_perf.jobfacts`); from two such
runs on, the search allows for their median: two runs are told apart, and a gap is
settled, only beyond it, and the best and a rival within it are run again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from sweepd.app.foreground import EXIT_AWAITING_DECISION, EXIT_VERDICT
from sweepd.kinds.model_perf.search import (
    FLAT,
    NOISE,
    TOLERANCE,
    Outcome,
    Probe,
    batch_space,
    best_mean,
    flat_top,
    next_probe,
    with_run_noise,
)
from sweepd.kinds.model_perf.search.repeat import repeat_top
from tests.golden_files import GOLDEN, check_golden_cases
from tests.simrun import NODES, open_store, perf_spec, run, sim_config

# A sweep of a curve peaking at 28 (TGS 1400) whose runs read with ~1.9 % noise, as the
# red-team case ran it before this change: 30, 1.5 % above its truth, stood as the best.
RUNS = [(4, 426), (40, 1112), (36, 1239), (24, 1287), (30, 1380), (27, 1363), (29, 1345),
        (32, 1354), (31, 1370), (26, 1373)]
PROBES = [Probe(v, Outcome.OK, float(t)) for v, t in RUNS]
SPACE = batch_space(40)
NOISY = replace(SPACE, noise=0.019)


def test_the_default_noise_changes_nothing() -> None:
    assert SPACE.noise == NOISE and SPACE.flat == FLAT and SPACE.tolerance == TOLERANCE
    assert repeat_top(SPACE, PROBES, runs_left=5) is None


def test_noise_read_as_tile_alignment_or_a_valley_is_within_the_noise_told() -> None:
    # At the default 1 %: 32 "a multiple of 8 running faster", then "a valley".
    tiled = next_probe(SPACE, PROBES[:7])
    assert tiled is not None and "multiple of 8" in tiled.why
    valley = next_probe(SPACE, PROBES[:8])
    assert valley is not None and "not concave" in valley.why
    # At the runs' 1.9 %, neither is beyond two runs' noise.
    for k in (7, 8):
        step = next_probe(NOISY, PROBES[:k])
        assert step is not None
        assert "multiple of" not in step.why and "not concave" not in step.why


def test_a_settled_search_at_high_noise_runs_the_best_and_its_rival_again() -> None:
    assert next_probe(SPACE, PROBES) is None  # before: the verdict, 30
    step = next_probe(NOISY, PROBES, runs_left=2)
    assert step is not None and step.value == 30
    assert "within two runs' noise" in step.why and "1.9%" in step.why
    again = [*PROBES, Probe(30, Outcome.OK, 1341.0)]
    top = best_mean(again)
    assert top is not None and top.value == 26  # 30's mean, 1360.5, is below 26's 1373
    rerun = next_probe(NOISY, again, runs_left=1)
    assert rerun is not None and rerun.value == 26  # the new best and its rival, 31
    assert next_probe(NOISY, again, runs_left=0) is None  # never past the budget
    note = flat_top(NOISY, again)
    # Within two runs' noise (3.8 %), not one: 27, 29, 30, 32 are as close as 31 was.
    assert note is not None and "within 3.8% (two runs' noise)" in note and "27, 29, 30, 31" in note


async def test_a_noisy_cell_finds_its_peak_and_says_the_noise(tmp_path: Path) -> None:
    """The red-team case end to end: 6 % step-to-step noise (1.9 % on a 10-step mean)."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "cluster": {"nodes": NODES, "gpu": "MI300X", "gpu_memory_gib": 192,
                    "time_scale": 0.0005, "noise": 0.06, "seed": 11},
        "models": {"llama2-70b": {"max_batch": 40, "nodes": 4, "peak_batch": 28,
                                  "peak_tgs": 1400}}}))
    config = sim_config(tmp_path, scenario)
    code, _ = await run(config, perf_spec(nodes="chi[2832,2863,2867-2868]"))
    assert code == EXIT_VERDICT
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        jobs = await store.jobs.of_sweep(sweep.id)
    finally:
        await store.close()
    read = [j.facts.get("run_noise") for j in jobs if j.facts.get("run_noise")]
    assert len(read) >= 2 and all(0.01 < n < 0.04 for n in read), read
    assert sweep.verdict is not None and sweep.verdict["best"] == 28, sweep.verdict
    assert "run-to-run noise at" in str(sweep.verdict["caveat"])


def test_a_repeat_that_failed_counts_toward_the_values_runs() -> None:
    """A re-run that OOMs or hangs is a run of the value too: it is not proposed again on
    every pass until max_runs is spent."""
    failed = [*PROBES, Probe(30, Outcome.OOM, None)]
    step = next_probe(NOISY, failed, runs_left=2)
    assert step is None or step.value != 30, step


def test_a_two_parameter_verdict_ranks_a_value_run_again_by_its_mean() -> None:
    from sweepd.kinds.model_perf.two_param.pairs import best_pair

    pairs = [("full", Probe(10, Outcome.OK, 1000.0)), ("minimal", Probe(12, Outcome.OK, 990.0)),
             ("full", Probe(10, Outcome.OK, 960.0))]
    top = best_pair(pairs)
    assert top is not None and top[0] == "minimal" and top[1].value == 12  # 10's mean: 980
    single = best_pair(pairs[:2])
    assert single is not None and single[1] is pairs[0][1]


# A red-team sweep whose runs each carry their own 2 % offset while their steps stay quiet
# (placement, clocks): the steps put the noise at the rules' 1 %, 35 read 3 % high and
# stood as the optimum; the truth's 33 never ran (35 is 1.9 % slower).
OFFSET_RUNS = [(4, 388), (60, 805), (54, 961), (32, 1365), (16, 892), (44, 1215), (38, 1350),
               (35, 1415), (34, 1401)]
OFFSET = [Probe(v, Outcome.OK, float(t)) for v, t in OFFSET_RUNS]


def test_measure_noise_runs_the_best_again_and_two_runs_apart_raise_the_noise() -> None:
    assert next_probe(batch_space(60), OFFSET, runs_left=3, thorough=True) is None  # default
    space = replace(batch_space(60), measure_noise=True)
    step = next_probe(space, OFFSET, runs_left=3, thorough=True)
    assert step is not None and step.value == 35 and step.repeat
    assert "ran once" in step.why and "measure_noise" in step.why and "SKILL.md" in step.why
    assert next_probe(space, OFFSET, runs_left=0, thorough=True) is None  # never past it
    # The second run reads 3.5 % under the first: beyond two runs' noise at 1 %, so the
    # noise is what the two runs measured, and the search goes on at it.
    again = [*OFFSET, Probe(35, Outcome.OK, 1367.0)]
    told = with_run_noise(space, again)
    assert told.noise_between and 0.02 < told.noise < 0.03, told.noise
    going = next_probe(space, again, runs_left=3, thorough=True)
    assert going is not None and going.value == 33, going  # beside the best 34, toward 32
    # Two runs within two runs' noise at 1 % change nothing: the search ends there.
    close = [*OFFSET, Probe(35, Outcome.OK, 1400.0)]
    assert with_run_noise(space, close) == space
    assert flat_top(space, close) is not None
    assert next_probe(space, close, runs_left=3, thorough=True) is None


# A red-team sweep at 2.1 % run noise (the steps' own): 24 read 2.4 % high and 21 4 % low,
# their secants settled 22 and 23 (the peak at 22, 23 1.4 % under it) and the verdict said
# "optimum 24 (7 runs)", that the best and a rival "are run again" though none was.
PEAK_RUNS = [(4, 514), (48, 310), (18, 1222), (32, 1134), (24, 1391), (28, 1216), (21, 1307)]
PEAK = [Probe(v, Outcome.OK, float(t)) for v, t in PEAK_RUNS]


def test_at_high_noise_the_values_beside_the_best_run_before_the_verdict() -> None:
    space = replace(batch_space(48), noise=0.021)
    assert next_probe(space, PEAK, runs_left=5) is None  # before, and the grid's now
    first = next_probe(space, PEAK, runs_left=5, thorough=True)
    assert first is not None and first.value == 24 and first.repeat
    again = [*PEAK, Probe(24, Outcome.OK, 1362.0)]
    beside = next_probe(space, again, runs_left=4, thorough=True)
    assert beside is not None and beside.value == 23 and "never ran" in beside.why
    # 23 reads above 24's mean: it is the best, and 22 beside it runs next.
    up = [*again, Probe(23, Outcome.OK, 1385.0)]
    nxt = next_probe(space, up, runs_left=3, thorough=True)
    assert nxt is not None and nxt.value in (22, 23), nxt


def test_every_rival_within_two_runs_noise_runs_again_not_the_closest_alone() -> None:
    # 23 best at one run read high; 24 (-0.5 %) and 22 (-2.8 %, the true peak) within
    # two runs' noise at 2.2 %. Before, only 24 ran again; 22 stayed at one run.
    space = replace(batch_space(48), noise=0.022)
    runs = [(20, 1293.0), (32, 1101.0), (26, 1292.0), (23, 1387.0), (22, 1347.0),
            (25, 1320.0), (24, 1352.0), (23, 1387.0), (24, 1356.0)]
    probes = [Probe(v, Outcome.OK, t) for v, t in runs]
    assert repeat_top(space, probes, runs_left=3) is None  # 23 and 24 both ran twice
    step = repeat_top(space, probes, runs_left=3, thorough=True)
    assert step is not None and step.value == 22, step


def test_the_noise_note_says_what_ran_again_not_that_it_will() -> None:
    from sweepd.kinds.model_perf.plan import _noise

    space = replace(batch_space(48), noise=0.021)
    none = _noise(space, PEAK)
    assert none is not None and "are run again" not in none and "no run to repeat" in none
    again = _noise(space, [*PEAK, Probe(24, Outcome.OK, 1362.0)])
    assert again is not None and "24 ran again" in again
    # Both figures to one decimal (1.0 % against "1 %" read as a difference), and a
    # figure from one pair of runs named as one (red team o05: 4.4 % from a single pair),
    # from pooled repeats as pooled: the golden's words.
    measured = _noise(replace(space, noise_between=1), PEAK)
    pooled = _noise(replace(space, noise_between=3), PEAK)
    assert measured is not None and pooled is not None
    check_golden_cases(GOLDEN / "model_perf_noise" / "noise_note.txt", {
        "no run repeated": none, "24 ran again": again, "one pair": measured,
        "three repeats pooled": pooled})


def test_from_two_pairs_on_the_pooled_spread_is_the_noise() -> None:
    # 28 read 3.1 % apart (beyond the one-pair bar), then 27 and 29 within 1.1 %: pooled,
    # 1.35 %, under that bar, yet the estimate; before, the noise fell back to 1 % and
    # the verdict dropped the caveat.
    runs = [(28, 1362.0), (28, 1405.0), (27, 1413.0), (27, 1410.0), (29, 1374.0), (29, 1389.0)]
    probes = [Probe(v, Outcome.OK, t) for v, t in runs]
    told = with_run_noise(batch_space(40), probes)
    assert told.noise_between == 3 and 0.013 < told.noise < 0.014, told.noise
    assert with_run_noise(batch_space(40), probes[2:]) == batch_space(40)  # one pair, close


async def test_a_peak_at_two_percent_noise_asks_rather_than_claim_single_runs(
        tmp_path: Path) -> None:
    """The red-team case end to end (6.5 % step noise, ~2 % on a run; peak 22, 23 1.4 %
    and 24 3 % under it): before, "optimum 24 (7 runs)", 22 and 23 never run, and the note
    said the best and a rival "are run again" though none was. Now the budget runs out with
    the best not yet told from its rivals and the sweep asks; given the extra runs, 22."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "cluster": {"nodes": NODES, "gpu": "MI300X", "gpu_memory_gib": 192,
                    "time_scale": 0.0005, "noise": 0.065, "seed": 216},
        "models": {"llama2-70b": {"max_batch": 48, "nodes": 4, "peak_batch": 22,
                                  "peak_tgs": 1400}}}))
    asked = sim_config(tmp_path / "asked", scenario)
    code, _ = await run(asked, perf_spec(nodes="chi[2832,2863,2867-2868]"))
    assert code == EXIT_AWAITING_DECISION
    store = await open_store(asked)
    try:
        sweep = (await store.sweeps.all())[0]
    finally:
        await store.close()
    assert "told the best from its rivals" in str(sweep.reason), sweep.reason
    extended = sim_config(tmp_path / "extended", scenario)
    code, _ = await run(extended, perf_spec(nodes="chi[2832,2863,2867-2868]",
                                            extend_budget=True))
    assert code == EXIT_VERDICT
    store = await open_store(extended)
    try:
        sweep = (await store.sweeps.all())[0]
    finally:
        await store.close()
    assert sweep.verdict is not None and sweep.verdict["best"] == 22, sweep.verdict
    assert "ran again" in str(sweep.verdict["caveat"]), sweep.verdict
