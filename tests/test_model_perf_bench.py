"""The model perf bench's ground truth and cost model (bench/probe_efficiency.py,
bench/probe_two_param.py): the figures in docs/benchmarks.md are only as fair as these.
Issue 22: node-hours from the simulator's timing applied to every method by its own rules,
the SKILL.md procedure done literally, the steep-interior family held out, and curves the
search was never built on."""

from __future__ import annotations

import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import probe_efficiency as pe  # noqa: E402
import probe_two_param as p2  # noqa: E402

from sweepd.kinds.model_perf.search import Outcome  # noqa: E402


def _curve(family: str, seed: int = 7) -> pe.Curve:
    return pe.make_curve(random.Random(seed), family, 0.08)


def _priced(curve: pe.Curve, probes: list[pe.Probe], attempts: int) -> float:
    """Seconds the cost model charges for `probes`, a hang at `attempts` attempts (without
    a memory line a hang reads as FAILED, the seed's silent OOM)."""
    return sum(attempts * (pe.INIT_S + pe.COMPILE_S + pe.HANG_S)
               if p.outcome in (Outcome.SLOW, Outcome.FAILED)
               else pe.INIT_S + pe.COMPILE_S if p.outcome is Outcome.OOM
               else pe.INIT_S + pe.COMPILE_S + pe.STEPS * curve.step_s(int(p.value))
               for p in probes)


def test_a_hang_costs_each_method_what_its_own_hang_rule_runs() -> None:
    """SKILL.md's phase table takes a hang after Memstats as a silent OOM, never retried:
    the literal procedure pays one attempt, as do the peers (no retry rule). sweepd retries
    a hang after a memory line that fits once: two. Before, every method was charged
    sweepd's retry."""
    hung = {name: 0 for name in pe.METHODS}
    for case in pe.workload(30, 555, ("steep-interior",), 0.08):
        for name, method in pe.METHODS.items():
            cluster = pe.Cluster(case.curve, random.Random(1), pe.NOISE)
            probes = method(cluster, case.estimate)
            retries = name in (pe.SWEEPD, "sweepd, after a prior sweep",
                               "sweepd, multi_peak option", "sweepd, measure_noise option",
                               "sweepd, measured_noise option", "sweepd, check_slowdown option")
            assert abs(cluster.seconds - _priced(case.curve, probes, 2 if retries else 1)) \
                < 1e-6, name
            hung[name] += sum(p.outcome in (Outcome.SLOW, Outcome.FAILED) for p in probes)
    assert hung[pe.SWEEPD] and hung["SKILL.md literal"], hung   # the test says something


def test_the_two_parameter_seed_pays_one_attempt_per_hang_too() -> None:
    case = p2.workload(40, 5, ("steep-interior",), 0.08)
    hung = 0
    for c in case:
        cluster = p2.Cluster2(c, random.Random(3), 0.0)
        pairs = p2._fix_one(p2.skill_literal)(cluster)
        slow = sum(1 for _, p in pairs if p.outcome is Outcome.SLOW)
        hung += slow
        passes = sum(pe.INIT_S + pe.COMPILE_S + pe.STEPS * c.step_s(c.setting(s),
                                                                    int(p.value))
                     for s, p in pairs if p.outcome is Outcome.OK)
        ooms = sum(pe.INIT_S + pe.COMPILE_S for _, p in pairs if p.outcome is Outcome.OOM)
        assert abs(cluster.seconds - passes - ooms
                   - slow * (pe.INIT_S + pe.COMPILE_S + pe.HANG_S)) < 1e-6
    assert hung, "no case hung: the test says nothing"


def test_the_steep_interior_family_peaks_far_below_a_cliff_it_hangs_before() -> None:
    """Issue 22's curve: a peak at most a quarter of the largest fit, a steep fall past
    it, and large batches whose first step outlasts the hang limit."""
    cases = pe.workload(60, 555, ("steep-interior",), 0.08)
    for case in cases:
        c = case.curve
        assert c.best_batch <= max(2, c.max_fit // 4)
        assert c.true(c.max_fit) < 0.5 * c.peak
    assert sum(c.curve.hangs(c.curve.max_fit) for c in cases) > len(cases) // 2


def test_the_fresh_held_out_shapes_are_new_and_not_concave() -> None:
    """The second held-out set: shapes outside both earlier sets, most with a valley (a
    batch slower than both a smaller and a larger one), which no concave curve has (the
    search assumes concavity between its runs)."""
    assert not set(pe.FRESH_FAMILIES) & {*pe.FAMILIES, *pe.HOLDOUT_FAMILIES}
    for family in pe.FRESH_FAMILIES:
        valleys = 0
        for seed in range(20):
            g = _curve(family, seed).tgs
            valleys += any(max(g[:j]) > 1.005 * g[j] < max(g[j + 1:])
                           for j in range(1, len(g) - 1))
        assert valleys >= 10, (family, valleys)
        assert pe.FRESH_CLIFF[1] > 64   # a wider cliff range than the sets before


def test_the_two_dimensional_oracle_runs_the_best_combination_and_its_neighbours() -> None:
    for c in p2.workload(10, 9, pe.FAMILIES, 0.03):
        cluster = p2.Cluster2(c, random.Random(2), 0.0)
        pairs = p2.oracle(cluster)
        top = p2.best_pair(pairs)
        assert top is not None and len({s for s, _ in pairs}) == 1
        assert abs(c.true(c.setting(top[0]), int(top[1].value)) - c.optimum) < 1e-9
        assert len(pairs) == (3 if int(pairs[0][1].value) > 1 else 2)


def test_slow_from_reads_every_run_from_the_kth_on_that_much_lower() -> None:
    """--slow-from K --slow F: the nodes slow from a sweep's K-th run on (OOMs count)."""
    curve = _curve("interior-peak")
    b = curve.best_batch
    steady, slowed = (pe.Cluster(curve, random.Random(2), 0.0, slow=s)
                      for s in (None, (3, 0.9)))
    before = [steady.run(b).tgs for _ in range(4)]
    after = [slowed.run(b).tgs for _ in range(4)]
    assert after[:2] == before[:2] and after[2:] == [0.9 * t for t in before[2:] if t]


def test_the_dented_family_is_flat_quiet_dented_and_its_memory_line_over_states() -> None:
    """Issue 48's dented family (bench/probe_dented.py), built from the recorded TPU v5e
    curves: quiet runs (0.02-0.1 %), a trend flat within a few %, one or two values +1.5 to
    +5 % over it, and a memory line that reads over the pool at values that pass (the GQA
    curve's 32 read 17.7 GB against 15.75)."""
    import probe_dented as pd

    rng = random.Random(48)
    curves = [pd.make_curve(rng) for _ in range(60)]
    over_pool_passes = 0
    for c in curves:
        assert 0.0002 <= c.run_noise <= 0.001
        assert 1 <= len(c.dents) <= 2 and all(d in c.values for d in c.dents)
        over_pool_passes += any(c.fits(b) and c.line_gb[b] > pd.POOL_GB for b in c.values)
        assert all(c.line_gb[b] >= c.need_gb[b] for b in c.values)
    assert over_pool_passes >= 5
    alone = sum(max(c.tgs[b] for b in c.values if c.fits(b) and b != c.best)
                < 0.99 * c.tgs[c.best] for c in curves)
    assert alone >= len(curves) // 2   # most curves' best is a dent standing alone


def test_measured_noise_in_the_bench_is_the_kinds_track() -> None:
    """The bench's measured_noise reads the steps once two runs passed; far below the prior,
    the track awaits the early repeat (`model_perf.noise_probe`) and holds the prior until a
    value ran twice (monitor/noise.py); at the default (the steps see the runs' std, 0.8 %)
    it is the prior, so the option runs what the default runs."""
    curve = _curve("saturating")
    space = pe.batch_space(curve.max_fit)
    ok = [pe.Probe(b, Outcome.OK, 1.0) for b in (4, 8)]
    quiet = pe.Cluster(curve, random.Random(1), pe.NOISE, step_se=0.001)
    assert pe._tracked(quiet, space, ok[:1]).noise == pe.RULE_NOISE   # one run: the prior
    told = pe._tracked(quiet, space, ok)
    assert told.track is not None and told.track.awaits_probe and told.noise == pe.RULE_NOISE
    assert told.track.steps == 0.001
    loud = pe.Cluster(curve, random.Random(1), pe.NOISE)
    assert pe._tracked(loud, space, ok).noise == pe.RULE_NOISE
    a = pe.sweepd(pe.Cluster(curve, random.Random(2), pe.NOISE), curve.max_fit)
    b = pe.sweepd_measured_noise(pe.Cluster(curve, random.Random(2), pe.NOISE), curve.max_fit)
    assert [p.value for p in a] == [p.value for p in b]
