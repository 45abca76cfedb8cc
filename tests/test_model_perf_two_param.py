"""Two-parameter model perf sweeps: the batch with remat_policy or the memory fraction,
searched together on the simulated cluster and judged against its ground truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.foreground import EXIT_VERDICT
from sweepd.config import Config
from sweepd.kinds.model_perf import report
from sweepd.kinds.model_perf.rules import TWO_PARAM_PROBE
from sweepd.kinds.model_perf.search import Outcome, Probe, SearchSpace, batch_space
from sweepd.kinds.model_perf.two_param.grid import next_pair, settled_notes
from sweepd.kinds.model_perf.two_param.pairs import best_pair
from sweepd.kinds.parse import parse_spec, read_spec_file
from sweepd.kinds.spec import SpecError
from sweepd.sim.scenario import load_scenario
from sweepd.sim.truth import true_outcome, true_peak_batch
from sweepd.store.rows import Run, Sweep
from sweepd.util.hostlists import expand_nodes
from tests.golden_files import GOLDEN, check_golden_cases
from tests.simrun import NODES, open_store, perf_spec, run, sim_config, write_scenario
from tests.support.two_param import curve, run_shaped

SAID = GOLDEN / "model_perf_two_param"

EXAMPLE = Path(__file__).parent.parent / "examples" / "model-perf" / "two-param.yaml"
POLICIES = ["minimal_flash", "full", "save_dot_except_mlp"]
# save_dot_except_mlp keeps more activations (x1.4: the largest fit falls from 14 to 10)
# and runs 8% faster: the winner is a combination that fixing either knob misses.
MODELS = {"llama2-70b": {"max_batch": 14, "peak_batch": 10, "peak_tgs": 1400,
                         "remat": {"save_dot_except_mlp": [1.4, 1.08], "full": [0.3, 0.78]}}}


async def _the_sweep(config: Config) -> tuple[Sweep, list[Run]]:
    """The one sweep a foreground run left in its store, and its runs."""
    store = await open_store(config)
    try:
        sweep = (await store.sweeps.all())[0]
        return sweep, list(await store.runs.of_sweep(sweep.id))
    finally:
        await store.close()


def _true_best(scenario: Path) -> tuple[int, str, float]:
    sc, nodes = load_scenario(scenario), expand_nodes(NODES)
    best = []
    for policy in POLICIES:
        over = {"remat_policy": policy}
        b = true_peak_batch(sc, "llama2-70b", nodes, over)
        tgs = true_outcome(sc, "llama2-70b", nodes,
                           {**over, "per_device_batch_size": str(b)}, {}, None).tgs
        best.append((tgs, b, policy))
    tgs, b, policy = max(best)
    return b, policy, tgs


async def test_a_two_parameter_sweep_reaches_the_true_best_combination(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, time_scale=0.0005, models=MODELS)
    config = sim_config(tmp_path, scenario)
    batch, policy, _ = _true_best(scenario)
    assert policy == "save_dot_except_mlp"  # the scenario is what this test is about
    spec = perf_spec(second={"parameter": "remat_policy", "values": POLICIES}, max_runs=24)
    code, lines = await run(config, spec)
    assert code == EXIT_VERDICT
    sweep, runs = await _the_sweep(config)
    verdict = sweep.verdict or {}
    assert (verdict["best"], verdict["second_best"]) == (batch, policy)
    # The verdict names both parameters; fixing the batch or the policy would have missed it.
    said = next(line for line in lines if "optimum" in line)
    assert f"per_device_batch_size={batch}" in said and f"remat_policy={policy}" in said
    assert len(runs) < 3 * 8  # fewer than a search per policy over 1..14 by halves
    table = report.markdown(sweep, runs, [])
    assert f"| {batch} |" in table and "★" in table.split(f"| {batch} |")[1].split("\n")[0]
    assert report.plot(sweep, runs, []) is not None
    # Each run was planned under the two-parameter rule, its pair in the recorded reason.
    store = await open_store(config)
    try:
        probes = [e for e in await store.events.of_sweep(sweep.id)
                  if e.rule == TWO_PARAM_PROBE.id]
    finally:
        await store.close()
    assert {e.run_id for e in probes} == {r.id for r in runs}
    assert any(policy in e.reason for e in probes)


@pytest.mark.parametrize("knob", ["max_target_length", "quantization"])
def test_a_knob_that_changes_the_training_is_refused_as_second(knob: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(perf_spec(second={"parameter": knob, "values": [2048, 4096]}))
    message = str(err.value)
    assert "\n" not in message.strip()
    check_golden_cases(SAID / f"refused_second_{knob}.txt", {"refusal": message})


def test_an_unknown_second_knob_and_a_second_with_another_parameter_are_refused() -> None:
    with pytest.raises(SpecError, match="must be one of"):
        parse_spec(perf_spec(second={"parameter": "attention", "values": ["a", "b"]}))
    with pytest.raises(SpecError, match="second goes with parameter per_device_batch_size"):
        parse_spec(perf_spec(parameter="remat_policy", values=["full", "minimal"],
                             second={"parameter": "_env_XLA_PYTHON_CLIENT_MEM_FRACTION",
                                     "values": [0.93, 0.98]}))


def _run_fraction(pool: float, b: int, fit_at_093: int) -> Probe:
    """A program whose temp is 10 GB per batch over 20 GB fixed: the pool decides the fit."""
    temp, fixed = 10.0 * b, 20.0
    if fixed + temp > pool:
        return Probe(b, Outcome.OOM, None, temp_gb=temp, fixed_gb=fixed, limit_gb=pool,
                     alloc_gb=fixed + temp - pool)
    return Probe(b, Outcome.OK, 100.0 * b / (b + 2), temp_gb=temp, fixed_gb=fixed,
                 limit_gb=pool)


def test_a_larger_fraction_runs_only_the_batches_its_pool_admits() -> None:
    """Fractions: the compiled program is the same, so the config's runs count at the
    larger pool; a smaller fraction is never run; the winner is at the larger pool."""
    pools = {0.93: 178.5, 0.85: 163.2, 0.98: 188.2}
    space = batch_space(14)
    pairs: list[tuple[float | int | str, Probe]] = []
    knob = "_env_XLA_PYTHON_CLIENT_MEM_FRACTION"
    while (step := next_pair(space, knob, [0.93, 0.85, 0.98], pairs)) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, _run_fraction(pools[float(step.second)], step.value, 15)))
        assert len(pairs) < 20
    assert 0.85 not in {s for s, _ in pairs}
    at_098 = [p.value for s, p in pairs if s == 0.98]
    assert at_098 and all(int(v) > 15 for v in at_098)  # only what 0.93's pool could not
    top = max((p for _, p in pairs if p.tgs), key=lambda p: p.tgs or 0.0)
    assert top.value == 16  # (188.2 - 20) / 10: the largest fit at 0.98


async def test_the_shipped_two_parameter_example_names_both_in_its_verdict(
        tmp_path: Path) -> None:
    """examples/model-perf/two-param.yaml (beside, not in, the one-example-per-kind set
    tests/test_examples.py checks) is accepted as it is and runs to a verdict on the
    simulator that names the batch and the policy."""
    spec = read_spec_file(EXAMPLE)
    assert parse_spec(spec).kind == "model-perf"
    scenario = write_scenario(tmp_path, time_scale=0.0005)
    config = sim_config(tmp_path, scenario)
    code, lines = await run(config, spec)
    assert code == EXIT_VERDICT
    said = next(line for line in lines if "optimum" in line)
    assert "per_device_batch_size=" in said and "remat_policy=" in said


async def test_a_fraction_sweep_on_the_simulator_runs_no_smaller_pool(tmp_path: Path) -> None:
    """The fraction as the second knob: the env setting reaches the jobs, a smaller pool
    than the config's is never run, and the verdict is the true best batch, at a setting
    the simulator runs at full speed (above 0.95 it starves RCCL)."""
    scenario = write_scenario(tmp_path, time_scale=0.0005)
    config = sim_config(tmp_path, scenario)
    knob = "_env_XLA_PYTHON_CLIENT_MEM_FRACTION"
    code, _ = await run(config, perf_spec(second={"parameter": knob,
                                                       "values": [0.93, 0.85, 0.98]}))
    assert code == EXIT_VERDICT
    sweep, runs = await _the_sweep(config)
    fractions = {r.params.env["XLA_PYTHON_CLIENT_MEM_FRACTION"] for r in runs}
    assert "0.85" not in fractions and "0.93" in fractions
    peak = true_peak_batch(load_scenario(scenario), "llama2-70b", expand_nodes(NODES), {},
                           {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.93"})
    verdict = sweep.verdict or {}
    assert (verdict["best"], verdict["second_best"]) == (peak, 0.93)
    [unrun] = [c for c in verdict["caveats"] if c["kind"] == "setting" and c["second"] == 0.85]
    check_golden_cases(SAID / "fraction_sweep_unrun_setting.txt", {"0.85": unrun["text"]})
    assert "configs/llama2-70b.env.sh" in verdict["proposal"]


def _run_policy(speed: float, act: float, b: int) -> Probe:
    """Temp 8 GB per batch (times the policy's activation factor) over 30 GB fixed in a
    178.5 GB pool; TGS rises with diminishing returns, times the policy's speed."""
    temp, fixed, pool = 8.0 * act * b, 30.0, 178.5
    if fixed + temp > pool:
        return Probe(b, Outcome.OOM, None, temp_gb=temp, fixed_gb=fixed, limit_gb=pool,
                     alloc_gb=fixed + temp - pool)
    return Probe(b, Outcome.OK, speed * 1000.0 * b / (b + 3), temp_gb=temp, fixed_gb=fixed,
                 limit_gb=pool)


def test_a_policy_that_cannot_beat_the_best_is_settled_after_few_runs() -> None:
    """A slower policy that also fits less: its speed, measured once, times the first
    policy's curve up to its own largest fit cannot beat the best, so it stops without a
    batch search of its own, and the verdict's notes say why."""
    policies = {"full": (1.0, 1.0), "slow": (0.9, 1.5)}
    space = batch_space(14)
    pairs: list[tuple[float | int | str, Probe]] = []
    while (step := next_pair(space, "remat_policy", list(policies), pairs)) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, _run_policy(*policies[str(step.second)], step.value)))
        assert len(pairs) < 20
    # An OOM at the best batch, a pass below, and one run where its own memory puts its
    # peak (its largest fit here), which reads its speed alike there.
    assert sum(1 for s, _ in pairs if s == "slow") <= 3
    top = max((p for _, p in pairs if p.tgs), key=lambda p: p.tgs or 0.0)
    assert top.value == 18  # (178.5 - 30) / 8: the largest fit of the faster-per-batch one
    notes = settled_notes(space, "remat_policy", list(policies), pairs)
    assert "cannot" in notes["slow"] or "at most" in notes["slow"]


def _sweep_shaped(space: SearchSpace, policies: dict[str, tuple[float, float, float]]
                  ) -> list[tuple[float | int | str, Probe]]:
    """A remat sweep of up to 20 runs, each policy's runs from `run_shaped`."""
    pairs: list[tuple[float | int | str, Probe]] = []
    while (step := next_pair(space, "remat_policy", list(policies), pairs,
                             runs_left=20 - len(pairs))) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, run_shaped(*policies[str(step.second)], step.value)))
        assert len(pairs) < 20
    return pairs


def test_a_policy_whose_curve_peaks_elsewhere_is_not_judged_by_one_run() -> None:
    """save_dot_except_mlp keeps 1.2x the activations and runs 1.05x faster, but its curve
    peaks at 14, not at the config's 24: read once at 24 it looks 0.66x as fast (red team
    t13: 'settled with 1 run', the optimum missed by 4.8%). Its speed is read again where
    its own memory puts its peak; the two readings disagree, so it gets its own search."""
    policies = {"minimal_flash": (1.0, 1.0, 24.0), "save_dot_except_mlp": (1.2, 1.05, 14.0)}
    space = batch_space(5)
    pairs = _sweep_shaped(space, policies)
    top = best_pair(pairs)
    assert top is not None and top[0] == "save_dot_except_mlp"
    assert abs(int(top[1].value) - 14) <= 1
    notes = settled_notes(space, "remat_policy", list(policies), pairs)
    assert "its curve has its own shape" in notes["save_dot_except_mlp"]


def test_a_policy_whose_speed_holds_at_its_own_peak_is_still_settled_by_its_bound() -> None:
    """Same curve shape, slower: the second reading agrees with the first and the bound
    settles the policy after two runs, saying where its speed was read."""
    policies = {"minimal_flash": (1.0, 1.0, 24.0), "slow": (1.2, 0.8, 24.0)}
    space = batch_space(5)
    pairs: list[tuple[float | int | str, Probe]] = []
    while (step := next_pair(space, "remat_policy", list(policies), pairs)) is not None:
        assert isinstance(step.value, int)
        pairs.append((step.second, run_shaped(*policies[str(step.second)], step.value)))
        assert len(pairs) < 20
    assert sum(1 for s, _ in pairs if s == "slow") == 2
    notes = settled_notes(space, "remat_policy", list(policies), pairs)
    assert "its own likely peak, alike" in notes["slow"]


def test_the_simulator_moves_a_policys_peak_only_when_asked(tmp_path: Path) -> None:
    """`remat_peak` stretches a policy's curve to peak at its batch, its height kept; a
    policy not in it keeps the default's shape (every existing figure unchanged)."""
    moved = {"llama2-70b": {**MODELS["llama2-70b"], "remat_peak": {"save_dot_except_mlp": 6}}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = load_scenario(write_scenario(tmp_path / "a", models=MODELS))
    shifted = load_scenario(write_scenario(tmp_path / "b", models=moved))
    nodes = expand_nodes(NODES)
    save_dot = {"remat_policy": "save_dot_except_mlp"}
    assert true_peak_batch(plain, "llama2-70b", nodes, save_dot) == 10
    assert true_peak_batch(shifted, "llama2-70b", nodes, save_dot) == 6
    for policy in ("minimal_flash", "full"):
        for b in (4, 10, 14):
            over = {"remat_policy": policy, "per_device_batch_size": str(b)}
            assert true_outcome(shifted, "llama2-70b", nodes, over, {}, None) == \
                true_outcome(plain, "llama2-70b", nodes, over, {}, None)
    at6 = {**save_dot, "per_device_batch_size": "6"}
    at10 = {**save_dot, "per_device_batch_size": "10"}
    assert true_outcome(shifted, "llama2-70b", nodes, at6, {}, None).tgs == pytest.approx(
        true_outcome(plain, "llama2-70b", nodes, at10, {}, None).tgs)


async def test_a_sweep_finds_a_policy_whose_curve_peaks_lower_on_the_simulator(
        tmp_path: Path) -> None:
    """Red team t13 end to end: the true best is save_dot_except_mlp at its own peak."""
    models = {"llama2-70b": {"max_batch": 30, "peak_batch": 24, "peak_tgs": 1400,
                             "remat": {"save_dot_except_mlp": [1.2, 1.05]},
                             "remat_peak": {"save_dot_except_mlp": 14}}}
    scenario = write_scenario(tmp_path, time_scale=0.0005, models=models)
    config = sim_config(tmp_path, scenario)
    spec = perf_spec(second={"parameter": "remat_policy",
                             "values": ["minimal_flash", "save_dot_except_mlp"]}, max_runs=20)
    code, _ = await run(config, spec)
    assert code == EXIT_VERDICT
    sweep, _ = await _the_sweep(config)
    verdict = sweep.verdict or {}
    assert verdict["second_best"] == "save_dot_except_mlp"
    assert abs(verdict["best"] - 14) <= 1


def test_a_policy_fitting_far_past_the_first_is_read_at_its_own_peak() -> None:
    """Red team u03b: minimal_flash peaks at 8 and fits 12; full fits 40 and peaks at 30,
    2 % over minimal_flash's best. Read once at 8 (0.46x there), minimal_flash's runs,
    scaled, stood in for every batch up to 40 and their falling trend "settled" full
    ("the trend leaves none that could be faster"): a claim about 28 batches no policy
    ran. Past minimal_flash's largest fit its curve is not a reading of full's: full runs
    at its own likely peak, then its own search finds 30."""
    policies = {"minimal_flash": (2.45, 1.0, 8.0), "full": (0.757, 1.02, 30.0)}
    space = batch_space(5)
    pairs = _sweep_shaped(space, policies)
    top = best_pair(pairs)
    assert top is not None and top[0] == "full" and abs(int(top[1].value) - 30) <= 1
    full = [int(p.value) for s, p in pairs if s == "full"]
    assert full[0] == 8 and 24 <= full[1] <= 28  # ~8 x 40 / 12: its own likely peak


def test_a_policy_settled_past_the_first_policys_runs_says_it_is_assumed() -> None:
    """Where its own likely peak cannot be placed (the first policy's runs printed no
    memory and failed nowhere: its largest fit is unknown), the first policy's curve
    extended past its largest run is what settles the policy after one run: the note says
    so rather than claim the trend."""
    first = [Probe(b, Outcome.OK, 1400.0 * curve(b, 8.0)) for b in (4, 12, 9, 7, 8)]
    full = run_shaped(0.757, 1.02, 30.0, 8)
    pairs: list[tuple[float | int | str, Probe]] = [
        *(("minimal_flash", p) for p in first), ("full", full)]
    space = batch_space(5)
    assert next_pair(space, "remat_policy", ["minimal_flash", "full"], pairs) is None
    notes = settled_notes(space, "remat_policy", ["minimal_flash", "full"], pairs)
    check_golden_cases(SAID / "policy_past_the_first_s_reach.txt", {"full": notes["full"]})
