import json
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import Finished, Stop, SweepContext
from sweepd.kinds.model_perf import report as perf_report
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import BUDGET_STOP, plan
from sweepd.kinds.model_perf.probes import probes
from sweepd.kinds.model_perf.rules import BEST_SO_FAR, CLIMB, LARGEST_FIT, OPTIMUM
from sweepd.kinds.model_perf.search import (
    FLAT,
    PRIOR_DRIFT,
    Outcome,
    Probe,
    SearchSpace,
    Value,
    batch_space,
    best,
    flat_top,
    memory_fit,
    next_probe,
    next_value,
    prior_mismatch,
    upper_bound,
    why_not_run,
)
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import Run, RunParams, Sweep
from tests.golden_files import GOLDEN, check_golden_cases
from tests.support.model_perf_prose import caveat_kinds, caveat_of, verdict_prose

PROSE = GOLDEN / "model_perf_strategy"

Curve = Callable[[Value], float | None]  # TGS, or None when the value OOMs


Memory = Callable[[Value], dict[str, float]]  # what a run at the value prints about memory


def sweep(space: SearchSpace, curve: Curve, memory: Memory | None = None) -> list[Probe]:
    """Drive the strategy to convergence, checking its invariants on every step."""
    probes: list[Probe] = []
    for _ in range(len(space.candidates) + 1):
        value = next_value(space, probes)
        if value is None:
            return probes
        assert value in space.candidates
        assert value not in {p.value for p in probes}, "repeated a value"
        if space.ordered:
            fails = [space.candidates.index(p.value) for p in probes if p.outcome != Outcome.OK]
            assert all(space.candidates.index(value) < f for f in fails), "probed above an OOM"
        tgs = curve(value)
        probes.append(Probe(value, Outcome.OK if tgs is not None else Outcome.OOM, tgs,
                            **(memory(value) if memory else {})))
    raise AssertionError("did not converge")


def linear_memory(max_fit: int, per_batch: float = 2.0, const: float = 1.0) -> Memory:
    """Compiled temp = const + per_batch * b; max_fit is the largest that fits the pool."""
    limit = 20 + const + per_batch * (max_fit + 0.5)
    return lambda b: {"temp_gb": const + per_batch * float(b), "fixed_gb": 20.0,
                      "limit_gb": limit}


def concave_curve(rng: random.Random, max_fit: int) -> list[float]:
    """Diminishing-returns rise, optional peak and decline: TGS of batch b at [b - 1]."""
    k = rng.uniform(0.5, 2.0 * max_fit)
    peak = rng.randint(1, max_fit)
    fall = rng.choice([0.0, rng.uniform(0.002, 0.05)])
    return [min(b, peak) / (min(b, peak) + k) * (1 - fall * max(0, b - peak))
            for b in range(1, max_fit + 1)]


def batch_curve(values: list[float]) -> Curve:
    return lambda b: values[int(b) - 1] if int(b) <= len(values) else None


@pytest.mark.parametrize("with_memory", [True, False])
def test_generated_curves_converge_to_the_true_peak_without_noise(with_memory: bool) -> None:
    rng = random.Random(5)
    runs = []
    for _ in range(300):
        max_fit = rng.randint(4, 64)
        values = concave_curve(rng, max_fit)
        estimate = max(1, round(max_fit * rng.uniform(0.2, 5.0)))
        space = batch_space(estimate)
        probes = sweep(space, batch_curve(values), linear_memory(max_fit) if with_memory else None)
        chosen = best(probes)
        assert chosen is not None and chosen.tgs is not None
        # Judged against the best integer batch that fits, not a grid's.
        assert chosen.tgs >= 0.995 * max(values)  # within the strategy's tolerance
        runs.append(len(probes))
    # The compiled-memory line finds the cliff in a run or two; without it the climb and
    # the descent are geometric, and cost more.
    # Secants are widened by the noise they cannot see here (bounds._secant): a noise-free
    # curve pays ~1 run for it (5.x -> 6.8 with memory, 7.x -> 8.3 without).
    assert sum(runs) / len(runs) < (7 if with_memory else 9)  # every integer: ~34


def test_exact_argmax_on_a_sharp_interior_peak() -> None:
    values = [1.0 - 0.05 * abs(b - 9) for b in range(1, 21)]  # peak at 9, OOM above 20
    every_integer = SearchSpace(tuple(range(1, 25)), 15)  # as a spec's explicit `values`
    chosen = best(sweep(every_integer, batch_curve(values)))
    assert chosen is not None and chosen.value == 9
    default = best(sweep(batch_space(16), batch_curve(values)))  # every integer, not a grid
    assert default is not None and default.value == 9


def test_peak_at_the_cliff_is_found_and_bracketed_by_an_oom() -> None:
    values = [float(b) for b in range(1, 21)]  # keeps rising until OOM above 20
    probes = sweep(batch_space(16), batch_curve(values))
    chosen = best(probes)
    assert chosen is not None and chosen.value == 20
    # Without a memory line the cliff is found by the TGS trend and OOMs alone, and the one
    # right above the best is known to fail: nothing left that could be faster.
    assert Probe(21, Outcome.OOM, None) in probes
    assert probes[0].value == 12  # ~75% of the estimate


def test_oom_at_the_first_probe_searches_below() -> None:
    values = [float(b) for b in range(1, 6)]  # only 1..5 fit, estimate says 16
    probes = sweep(batch_space(16), batch_curve(values))
    assert probes[0] == Probe(12, Outcome.OOM, None)  # 75% of the estimate
    chosen = best(probes)
    assert chosen is not None and chosen.value == 5  # the largest integer that fits


def test_everything_ooms_down_to_one_means_nothing_fits() -> None:
    probes = sweep(batch_space(16), lambda b: None)
    assert probes[-1] == Probe(1, Outcome.OOM, None)
    assert best(probes) is None
    assert next_value(batch_space(16), probes) is None


def test_estimate_far_too_low_climbs_to_the_cliff() -> None:
    values = [b / (b + 40) for b in range(1, 41)]  # steep all the way to 40
    probes = sweep(batch_space(2, upper=64), batch_curve(values))  # every integer 1..64
    chosen = best(probes)
    assert chosen is not None and chosen.value == 40
    # Past the estimate's error band it climbs geometrically, not one value at a time.
    assert len(probes) <= 16


def test_estimate_far_too_high_descends() -> None:
    values = [min(b, 4) / (min(b, 4) + 1) for b in range(1, 7)]  # plateau from 4, OOM above 6
    probes = sweep(batch_space(60), batch_curve(values))
    chosen = best(probes)
    assert chosen is not None and chosen.tgs == max(values)
    assert len(probes) <= 10


def test_failed_counts_as_oom_and_unknown_values_are_ignored() -> None:
    space = batch_space(8)
    probes = [
        Probe(6, Outcome.OK, 1.0),
        Probe(10, Outcome.FAILED, None),
        Probe(5000, Outcome.OK, 9.0),  # not a candidate: ignored
    ]
    for _ in range(10):
        value = next_value(space, probes)
        if value is None:
            break
        assert isinstance(value, int) and value < 10
        probes.append(Probe(value, Outcome.OK, 1.0 + value / 100))
    assert next_value(space, probes) is None


def test_categorical_space_tries_every_value_once() -> None:
    space = SearchSpace(("full", "minimal_flash", "save_qkv"), None, ordered=False)
    tgs = {"full": 1100.0, "minimal_flash": 1300.0, "save_qkv": None}
    probes = sweep(space, lambda v: tgs[str(v)])
    assert [p.value for p in probes] == ["full", "minimal_flash", "save_qkv"]
    chosen = best(probes)
    assert chosen is not None and chosen.value == "minimal_flash"


def test_float_space_of_mem_fractions() -> None:
    fractions = (0.80, 0.85, 0.90, 0.93, 0.95, 0.97)
    tgs = {0.80: 1000.0, 0.85: 1050.0, 0.90: 1080.0, 0.93: 1090.0, 0.95: 1070.0, 0.97: None}
    probes = sweep(SearchSpace(fractions, estimate_index=3), lambda v: tgs[float(v)])
    chosen = best(probes)
    assert chosen is not None and chosen.value == 0.93


def test_batch_space_is_every_integer_with_the_estimate_marked() -> None:
    space = batch_space(16)
    assert space.candidates == tuple(range(1, 4097))
    assert space.candidates[space.estimate_index or 0] == 16


def test_batch_space_bounds() -> None:
    space = batch_space(50, lower=4, upper=32)
    assert space.candidates == tuple(range(4, 33)) and space.estimate_index == 28  # clamped
    assert batch_space(16, lower=5, upper=6).candidates == (5, 6)
    with pytest.raises(ValueError):
        batch_space(4, lower=8, upper=6)


def test_an_oom_far_above_the_estimate_bounds_the_search() -> None:
    """All of 4..10 ran and rose past the estimate (5), 13 ran out of memory: 11 and 12 are
    still to try, so the search must not stop at 10."""
    rising = [Probe(b, Outcome.OK, 1000.0 + 50 * b) for b in range(4, 11)]
    probes = [*rising, Probe(13, Outcome.OOM, None)]
    assert next_value(batch_space(5), probes) in (11, 12)
    probes += [Probe(11, Outcome.OK, 1550.0), Probe(12, Outcome.OK, 1600.0)]
    assert next_value(batch_space(5), probes) is None
    chosen = best(probes)
    assert chosen is not None and chosen.value == 12


def _run(seq: int, batch: int, outcome: str | None, tgs: float | None = None,
         failure: str | None = None, nodes: str = "chi[1-4]") -> Run:
    return Run(id=seq, sweep_id=1, seq=seq, label=f"b={batch}",
               params_json=RunParams(overrides={"per_device_batch_size": batch}).to_json(),
               nodes=nodes,
               state=RunState.PASSED if outcome == "pass" else RunState.FAILED,
               outcome=outcome, tgs=tgs, mfu=None, failure_class=failure, detail=None,
               not_before=None)


def test_a_node_fault_is_not_the_values_upper_bound() -> None:
    """Batch 12 failed on an ECC error (retries used up): that says nothing about 12, so
    the search must not treat 12 and above as not fitting."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 8, 12, 16]})
    assert isinstance(spec, ModelPerfSpec)
    runs = [_run(1, 12, "fail", failure="ecc"), _run(2, 8, "pass", 1000.0, nodes="chi[1-3]")]
    ctx = SweepContext(runs=runs, nodes=["chi1", "chi2", "chi3"], gpu_memory_gib=192,
                       facts=PerfFacts())
    assert [p.value for p in probes(spec, ctx)] == [8]
    new = plan(spec, ctx)
    assert isinstance(new, list) and new[0].params.overrides == {"per_device_batch_size": 12}
    # An OOM does bound it.
    oom = SweepContext(runs=[_run(1, 12, "oom"), _run(2, 8, "pass", 1000.0)],
                       nodes=["chi1", "chi2", "chi3", "chi4"], gpu_memory_gib=192,
                       facts=PerfFacts())
    after_oom = plan(spec, oom)
    assert isinstance(after_oom, list)
    # never 12 or 16
    assert [n.params.overrides for n in after_oom] == [{"per_device_batch_size": 4}]
    # Spoiled runs still count against max_runs.
    capped = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                         "values": [4, 8, 12, 16], "max_runs": 2})
    assert isinstance(capped, ModelPerfSpec)
    assert not isinstance(plan(capped, ctx), list)   # finished, not another run


def test_an_optimum_measured_on_fewer_nodes_than_pinned_says_so() -> None:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 8]})
    assert isinstance(spec, ModelPerfSpec)
    runs = [_run(1, 4, "pass", 900.0, nodes="chi[1-3]"),
            _run(2, 8, "pass", 1000.0, nodes="chi[1-3]")]
    ctx = SweepContext(runs=runs, nodes=["chi1", "chi2", "chi3"], gpu_memory_gib=192,
                       facts=PerfFacts())
    done = plan(spec, ctx)
    assert isinstance(done, Finished)
    assert done.verdict["nodes"] == 3 and done.verdict["best"] == 8
    assert done.verdict["proposal"].endswith("measured on 3N")
    check_golden_cases(PROSE / "on_fewer_nodes.txt", {"verdict": verdict_prose(done)})


def test_after_an_exclusion_the_search_starts_over_and_other_node_sets_bound_nothing() -> None:
    """Results from another node set never bound this one, not even an OOM on more nodes
    (issue 22: an OOM at 12 after 16 passed ran again on 3 nodes and OOMed again)."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 8, 12]})
    assert isinstance(spec, ModelPerfSpec)
    runs = [_run(1, 8, "pass", 1000.0), _run(2, 12, "oom", None)]   # on chi[1-4]
    three = SweepContext(runs=runs, nodes=["chi1", "chi2", "chi3"], gpu_memory_gib=192,
                         facts=PerfFacts())
    assert probes(spec, three) == []
    again = plan(spec, three)
    assert isinstance(again, list) and again[0].nodes == ["chi1", "chi2", "chi3"]
    check_golden_cases(PROSE / "after_an_exclusion.txt", {"next run": again[0].reason})
    # A pass on fewer nodes says nothing about more: memory per GPU is lower there.
    small = [_run(1, 8, "pass", 1000.0, nodes="chi[1-3]")]
    four = SweepContext(runs=small, nodes=["chi1", "chi2", "chi3", "chi4"],
                        gpu_memory_gib=192, facts=PerfFacts())
    assert probes(spec, four) == []


def test_a_search_cut_short_or_at_the_edge_says_so() -> None:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 6, 8, 10, 12], "max_runs": 2})
    assert isinstance(spec, ModelPerfSpec)
    four = ["chi1", "chi2", "chi3", "chi4"]
    rising = [_run(1, 8, "pass", 1000.0), _run(2, 10, "pass", 1100.0)]
    # The budget is spent with 12, beside the best, unexplored: the sweep asks.
    ask = plan(spec, SweepContext(runs=rising, nodes=four, gpu_memory_gib=192,
                                  facts=PerfFacts()))
    assert isinstance(ask, Stop) and ask.rule == BUDGET_STOP
    assert ask.evidence is not None and ask.evidence.startswith("per_device_batch_size=12")
    # Resumed, it takes the run there.
    more = plan(spec, SweepContext(runs=rising, nodes=four, gpu_memory_gib=192,
                                   facts=PerfFacts(), acknowledged_stops=[BUDGET_STOP]))
    assert isinstance(more, list) and more[0].params.overrides == {"per_device_batch_size": 12}
    edge = parse_spec({**spec.model_dump(), "max_runs": 12})
    assert isinstance(edge, ModelPerfSpec)
    top = [*rising, _run(3, 12, "pass", 1200.0)]
    done = plan(edge, SweepContext(runs=top, nodes=four, gpu_memory_gib=192,
                                   facts=PerfFacts()))
    assert isinstance(done, Finished) and done.verdict["settled"]
    assert (done.rule, done.verdict["best"]) == (OPTIMUM.id, 12)
    assert caveat_kinds(done) == ["edge", "ungiven", "not_run"]
    # No OOM anywhere: the caveat names what did rule 4 and 6 out (the golden's words).
    assert "OOM" not in done.verdict["caveat"]
    # extend_budget takes up to 4 more runs without asking; spent too, the verdict is
    # unsettled and names the gap beside the best.
    wide = parse_spec({**spec.model_dump(), "extend_budget": True, "max_runs": 1,
                       "values": [4, 6, 8, 9, 10, 12]})
    assert isinstance(wide, ModelPerfSpec)
    five = [_run(1, 8, "pass", 1000.0), _run(2, 9, "pass", 1050.0), _run(3, 4, "pass", 500.0),
            _run(4, 6, "pass", 750.0), _run(5, 10, "pass", 1100.0)]
    cut = plan(wide, SweepContext(runs=five, nodes=four, gpu_memory_gib=192,
                                  facts=PerfFacts()))
    assert isinstance(cut, Finished) and not cut.verdict["settled"]
    assert (cut.rule, cut.verdict["best"]) == (BEST_SO_FAR.id, 10)
    budget = caveat_of(cut, "budget")
    assert (budget["max_runs"], budget["next"]) == (5, 12)
    assert caveat_kinds(cut) == ["budget", "gap", "not_run"]
    check_golden_cases(PROSE / "cut_short_or_at_the_edge.txt", {
        "budget spent beside the best (asks)": ask.reason,
        "at the edge": verdict_prose(done), "cut by extend_budget": verdict_prose(cut)})


def test_values_not_run_name_what_bounded_them() -> None:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 8, 12, 16]})
    assert isinstance(spec, ModelPerfSpec)
    four = ["chi1", "chi2", "chi3", "chi4"]
    said: dict[str, str] = {}
    for name, last in [("above an OOM", _run(3, 12, "oom")),
                       ("above a failed compile", _run(3, 12, "fail", failure="compile"))]:
        runs = [_run(1, 4, "pass", 900.0), _run(2, 8, "pass", 1000.0), last]
        done = plan(spec, SweepContext(runs=runs, nodes=four, gpu_memory_gib=192,
                                       facts=PerfFacts()))
        assert isinstance(done, Finished), done
        said[name] = str(caveat_of(done, "not_run")["text"])
    # Bounded by the compiled-memory line alone: it says so, and names no OOM.
    space = SearchSpace((4, 8, 12, 16, 20), None)
    memory = linear_memory(13)
    ran = [Probe(b, Outcome.OK, 800.0 + 25 * b, **memory(b)) for b in (4, 8, 12)]
    assert next_probe(space, ran) is None
    why = why_not_run(space, ran, (16, 20))
    assert set(why) == {16, 20}
    said.update({f"{v} by the compiled-memory line": str(w) for v, w in why.items()})
    check_golden_cases(PROSE / "values_not_run.txt", said)


def test_report_marks_runs_on_another_node_count_and_an_oom_below_a_value_that_ran() -> None:
    spec = {"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]"}
    sweep = Sweep(id=1, kind="model-perf", name="s", spec_json=json.dumps(spec),
                  state=SweepState.DONE, reason=None,
                  verdict_json=json.dumps({"best": 13, "nodes": 3}), created_at="", updated_at="")
    runs = [_run(1, 8, "pass", 900.0),                       # on chi[1-4], before an exclusion
            _run(2, 11, "pass", 1000.0, nodes="chi[1-3]"),
            _run(3, 12, "oom", None, nodes="chi[1-3]"),       # yet 13 ran
            _run(4, 13, "pass", 1050.0, nodes="chi[1-3]")]
    status = {r["value"]: r["status"] for r in perf_report.rows(sweep, runs, [])}
    assert sorted(status) == [8, 11, 12, 13] and status[13] == "works ← optimum"
    check_golden_cases(PROSE / "report_statuses.txt", {str(v): s for v, s in status.items()})
    # Before a verdict: compared with the count the search is on now (its latest run's).
    running = replace(sweep, state=SweepState.RUNNING, verdict_json=None)
    status = {r["value"]: r["status"] for r in perf_report.rows(running, runs, [])}
    assert status[8] == "works (on 4N)" and status[11] == "works"
    # Cut short by max_runs: the best is not called the optimum.
    cut = replace(sweep, verdict_json=json.dumps({"best": 13, "nodes": 3, "settled": False}))
    assert perf_report.rows(cut, runs, [])[-1]["status"] == "works ← best so far"


def test_a_value_run_twice_has_one_status_from_its_mean() -> None:
    """Red team d06: 20 ran twice past the optimum 19 (1,329 and 1,293, mean 1,311 under
    19's 1,315): one row said "works", the other "works (regression)"."""
    spec = {"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]"}
    sweep = Sweep(id=1, kind="model-perf", name="s", spec_json=json.dumps(spec),
                  state=SweepState.DONE, reason=None,
                  verdict_json=json.dumps({"best": 19, "nodes": 4}), created_at="", updated_at="")
    runs = [_run(1, 18, "pass", 1258.0), _run(2, 19, "pass", 1319.0),
            _run(3, 19, "pass", 1311.0), _run(4, 20, "pass", 1329.0),
            _run(5, 20, "pass", 1293.0), _run(6, 25, "pass", 1205.0)]
    status = [(r["value"], r["status"]) for r in perf_report.rows(sweep, runs, [])]
    assert status == [(18, "works"), (19, "works ← optimum"), (19, "works ← optimum"),
                      (20, "works (regression)"), (20, "works (regression)"),
                      (25, "works (regression)")], status


# -- learning memory from every run ------------------------------------------------------

def _mem(value: int, temp: float, outcome: Outcome = Outcome.OK, tgs: float | None = 1.0,
         alloc: float | None = None) -> Probe:
    """A run whose log printed compiled memory: 20 GB fixed, a 100 GB pool."""
    return Probe(value, outcome, tgs if outcome is Outcome.OK else None, temp_gb=temp,
                 fixed_gb=20.0, limit_gb=100.0, alloc_gb=alloc)


def test_one_run_predicts_the_largest_batch_that_fits() -> None:
    """Temp 8 GB at batch 4 is 2 GB per batch; 80 GB of room, 1% kept: batch 39."""
    step = next_probe(batch_space(5), [_mem(4, 8.0)])
    assert step is not None and step.value == 39
    assert step.rule == LARGEST_FIT.id
    check_golden_cases(PROSE / "one_run_largest_fit.txt", {"step": step.why})


def test_two_runs_fit_the_line_with_its_constant_part() -> None:
    """Temp = 10 + 2b: the one-run line (through 0) under-predicts, the fitted one does not."""
    first = next_probe(batch_space(5), [_mem(4, 18.0)])
    assert first is not None and first.value == 17   # 18/4 = 4.5 GB per batch: low
    step = next_probe(batch_space(5), [_mem(4, 18.0, tgs=1.0), _mem(17, 44.0, tgs=1.2)])
    assert step is not None and step.value == 34      # (99 - 20 - 10) / 2
    assert step.rule == LARGEST_FIT.id
    check_golden_cases(PROSE / "two_run_line.txt", {"step": step.why})


def test_the_fitted_line_proves_what_cannot_fit() -> None:
    """Temp = 10 + 2b over two runs: 35 needs 100 GB (the pool), 36 more than the pool. On a
    rising curve the search tries 35 and ends there: 36 cannot fit, so it is never run."""
    probes = [_mem(4, 18.0, tgs=1.0), _mem(34, 78.0, tgs=1.3), _mem(30, 70.0, tgs=1.25)]
    assert next_value(batch_space(5), probes) == 35
    probes.append(_mem(35, 80.0, tgs=1.31))
    assert next_value(batch_space(5), probes) is None


def test_an_oom_lowers_the_pool_below_what_it_needed() -> None:
    """Batch 39 printed 98 GB total (under the 100 GB pool) and still ran out of memory: the
    next prediction keeps under 98 GB."""
    probes = [_mem(4, 8.0), _mem(39, 78.0, Outcome.OOM, alloc=2.5)]
    step = next_probe(batch_space(5), probes)
    assert step is not None and step.value == 38
    assert "lowered by the OOM at 39" in step.why


def test_an_oom_allocation_bounds_the_largest_fit_from_below() -> None:
    """The line (temp = 10 + 2b against Memstats' pool) says 34; an OOM at 40 that failed
    allocating only 1 GB, at 2 GB per batch, says 39 fits: the pool is larger than it says."""
    probes = [_mem(4, 18.0), _mem(10, 30.0, tgs=1.2), Probe(40, Outcome.OOM, None, alloc_gb=1.0)]
    fit = memory_fit(probes)
    assert fit is not None and fit.slope == pytest.approx(2.0)
    step = next_probe(batch_space(5), probes)
    assert step is not None and step.value == 39
    check_golden_cases(PROSE / "oom_allocation_bound.txt", {"step": step.why})


def test_a_first_oom_descends_by_its_memory_line() -> None:
    """The first probe (75% of a 5x too high estimate) OOMs; its line says where to go."""
    step = next_probe(batch_space(200), [_mem(150, 300.0, Outcome.OOM)])
    assert step is not None and isinstance(step.value, int)
    assert 30 <= step.value <= 40 and "below the OOM at 150" in step.why


def test_without_a_memory_line_the_climb_is_geometric_past_a_stale_estimate() -> None:
    """Estimate 5, batch 4 ran: each step up is at least 1.5x, never one value at a time."""
    curve = batch_curve([b / (b + 40) for b in range(1, 61)])   # rising to a cliff at 60
    probes = [Probe(4, Outcome.OK, curve(4))]
    climbed = [4]
    while (step := next_probe(batch_space(5), probes)) is not None and \
            not any(p.outcome is Outcome.OOM for p in probes):
        assert isinstance(step.value, int)
        assert step.value >= 1.5 * climbed[-1] - 1 and step.rule == CLIMB.id
        climbed.append(step.value)
        tgs = curve(step.value)
        probes.append(Probe(step.value, Outcome.OK if tgs else Outcome.OOM, tgs))
    assert climbed[:4] == [4, 6, 9, 14]


def test_a_stale_estimate_is_left_behind_by_the_memory_line() -> None:
    """The formula said 5; the first run's line says ~39 fits: the next probe goes there,
    not to 6."""
    step = next_probe(batch_space(5), [_mem(4, 8.0)])
    assert step is not None and step.value == 39


def test_refinement_finds_the_integer_peak_and_says_when_the_top_is_flat() -> None:
    sharp = [1.0 - 0.04 * abs(b - 23) for b in range(1, 41)]   # peak at 23 of 40
    probes = sweep(batch_space(30), batch_curve(sharp), linear_memory(40))
    chosen = best(probes)
    assert chosen is not None and chosen.value == 23
    flat = [Probe(30, Outcome.OK, 1000.0), Probe(31, Outcome.OK, 1004.0)]
    note = flat_top(batch_space(30), flat)
    assert note is not None
    check_golden_cases(PROSE / "flat_top.txt", {"note": note})


def test_an_earlier_sweeps_runs_stand_in_scaled_and_never_above_a_failure() -> None:
    earlier = (Probe(8, Outcome.OK, 900.0), Probe(12, Outcome.OK, 1000.0),
               Probe(16, Outcome.OK, 1100.0))
    space = replace(batch_space(16, upper=16), start=12, start_why="at the earlier peak",
                    prior=earlier)
    first = next_probe(space, [])
    assert first is not None and (first.value, first.why) == (12, "at the earlier peak")
    # 1.5% slower today at 12 (within two runs' noise): 16 is still the highest, scaled,
    # so it is measured here.
    step = next_probe(space, [Probe(12, Outcome.OK, 985.0)])
    assert step is not None and step.value == 16 and "measure it here" in step.why
    # But not when this sweep already ran out of memory below it.
    step = next_probe(space, [Probe(12, Outcome.OK, 985.0), Probe(14, Outcome.OOM, None)])
    assert step is None or int(step.value) < 14


def test_an_earlier_sweeps_curve_that_does_not_hold_here_is_not_used() -> None:
    """One shared value is all that says the two curves have one shape: the earlier peak
    measured 0.685x (the peak moved to 30) is not a slower day, and scaling the earlier
    curve by it would settle every gap after one run."""
    earlier = tuple(Probe(b, Outcome.OK, t) for b, t in
                    ((8, 1200.0), (12, 1350.0), (16, 1401.0), (24, 1300.0), (40, 900.0)))
    space = replace(batch_space(40, upper=40), start=16, start_why="at the earlier peak",
                    prior=earlier)
    moved = [Probe(16, Outcome.OK, 960.0)]
    off = prior_mismatch(space, moved)
    assert off is not None and off.ratios == ((16, 960.0 / 1401.0),)
    assert next_probe(space, moved) == next_probe(replace(space, prior=()), moved)
    assert next_probe(space, moved) is not None
    assert upper_bound(space, moved) == upper_bound(replace(space, prior=()), moved)
    # Within two runs' noise (FLAT) of the earlier run, its curve stands in at once.
    same = [Probe(16, Outcome.OK, 1401.0 * (1 - FLAT + 0.005))]
    assert prior_mismatch(space, same) is None
    assert next_probe(space, same) != next_probe(replace(space, prior=()), same)
    # Beyond it but within the node variance (PRIOR_DRIFT), one ratio cannot tell a slower
    # day from a moved peak (a peak moved 30 -> 28 read 0.976x at 30 and the old curve
    # settled the sweep, 2.3 % slow): the earlier runs wait for a second shared value.
    slower = [Probe(16, Outcome.OK, 1401.0 * (1 - PRIOR_DRIFT + 0.005))]
    assert prior_mismatch(space, slower) is None
    assert next_probe(space, slower) == next_probe(replace(space, prior=()), slower)
    agree = [*slower, Probe(24, Outcome.OK, 1300.0 * (1 - PRIOR_DRIFT + 0.005))]
    assert prior_mismatch(space, agree) is None
    assert next_probe(space, agree) != next_probe(replace(space, prior=()), agree)
    # Each ratio near 1, but not one scale: the shape changed between them.
    bent = [Probe(16, Outcome.OK, 1401.0 * 0.97), Probe(24, Outcome.OK, 1300.0 * 1.03)]
    off = prior_mismatch(space, bent)
    assert off is not None and [v for v, _ in off.ratios] == [16, 24]
    # Another policy's curve (remat_step.py) differs in speed by design: its ratio is the speed.
    assert prior_mismatch(replace(space, prior_drift=None), moved) is None


def test_memstats_from_the_pinned_nodes_are_not_reused_on_fewer() -> None:
    """Param memory per GPU grows when fewer nodes shard the model: Memstats printed on
    the 4 pinned nodes must not size the first probe on the 3 an exclusion left."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]"})
    assert isinstance(spec, ModelPerfSpec)
    four = ["chi1", "chi2", "chi3", "chi4"]
    on_four = plan(spec, SweepContext(runs=[], nodes=four, gpu_memory_gib=192,
                                      facts=PerfFacts(param_gb=2.0)))
    assert isinstance(on_four, list)
    assert "params 2.0 GB" in on_four[0].reason
    on_three = plan(spec, SweepContext(runs=[], nodes=four[:3], gpu_memory_gib=192,
                                       facts=PerfFacts(param_gb=2.0)))
    assert isinstance(on_three, list)
    assert "memstats" not in on_three[0].reason and "memory estimate:" in on_three[0].reason
    check_golden_cases(PROSE / "memstats_on_fewer_nodes.txt", {
        "on the 4 pinned": on_four[0].reason, "on 3": on_three[0].reason})


def test_a_memory_line_a_little_under_the_pool_does_not_walk_the_edge_one_batch_a_run() -> None:
    """Red team n02: the compiled-memory line with its 1 % margin predicts ~438 where 440
    fits; every pass above it said "one more", and the search ran 439, 440, 441 (each
    worth a batch's TGS, inside the noise) and ran out of runs short of the peak at 400.
    The gaps below go first; their trend settles the top without the walk."""
    def memory(b: Value) -> dict[str, float]:
        return {"temp_gb": 0.3875 * float(b), "fixed_gb": 7.0, "limit_gb": 178.6}

    def curve(b: Value) -> float | None:
        x = float(b)
        if 7.0 + 0.3875 * x > 177.7:  # the runtime's own buffers: 440 fits, 441 does not
            return None
        if x <= 400:
            return 1400 * (x / 400) ** 0.6
        d = (x - 400) / 400
        return 1400 * (1 - 0.3 * d - 0.3 * d * d)

    def run(b: Value) -> Probe:
        tgs = curve(b)
        mem = memory(b)
        if tgs is None:
            need = mem["fixed_gb"] + mem["temp_gb"] - 177.7 + 0.2
            return Probe(b, Outcome.OOM, None, alloc_gb=need, **mem)
        return Probe(b, Outcome.OK, tgs, **mem)

    space = batch_space(5)
    probes: list[Probe] = []
    while len(probes) < 12 and (value := next_value(space, probes)) is not None:
        probes.append(run(value))
    ran = {p.value for p in probes}
    assert len(ran & {439, 440, 441}) <= 1, sorted(ran)
    top = best(probes)
    assert top is not None and (curve(top.value) or 0.0) >= 0.99 * 1400


def test_a_budget_cut_with_a_rival_within_the_noise_asks_before_it_finishes() -> None:
    """Red team n02: the runs ran out with no untried gap beside the best, but runs either
    side measured within the noise of it (the true peak between them); it finished with
    the best so far 3.2 % slow. A rival the noise cannot tell apart asks, as a gap does."""
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [4, 8, 10, 12, 16, 20], "max_runs": 3})
    assert isinstance(spec, ModelPerfSpec)
    four = ["chi1", "chi2", "chi3", "chi4"]
    runs = [_run(1, 8, "pass", 1000.0), _run(2, 10, "pass", 1100.0),
            _run(3, 12, "pass", 1095.0)]
    ask = plan(spec, SweepContext(runs=runs, nodes=four, gpu_memory_gib=192,
                                  facts=PerfFacts()))
    assert isinstance(ask, Stop) and ask.rule == BUDGET_STOP
    assert ask.evidence is not None and ask.evidence.startswith("per_device_batch_size=20")
    check_golden_cases(PROSE / "rival_within_the_noise.txt", {"stop": ask.reason})
    more = plan(spec, SweepContext(runs=runs, nodes=four, gpu_memory_gib=192,
                                   facts=PerfFacts(), acknowledged_stops=[BUDGET_STOP]))
    assert isinstance(more, list)
