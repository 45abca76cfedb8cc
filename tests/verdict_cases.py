"""Model perf verdicts from given runs, through the real planner: each case a name, the
spec, the runs and the nodes left usable. tests/test_model_perf_verdict.py asserts their
structure; tests/test_verdict_golden.py holds their prose to tests/golden/model_perf/."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sweepd.core.states import RunState
from sweepd.kinds.api import Finished, SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts, Prior
from sweepd.kinds.model_perf.plan_two import plan
from sweepd.kinds.model_perf.search import Outcome, Probe
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import Run, RunParams

FOUR = ["chi1", "chi2", "chi3", "chi4"]


def run(seq: int, value: Any, outcome: str, tgs: float | None = None,
        nodes: str = "chi[1-4]", second: tuple[str, Any] | None = None) -> Run:
    overrides: dict[str, Any] = {"per_device_batch_size": value}
    if second is not None:
        overrides[second[0]] = second[1]
    return Run(id=seq, sweep_id=1, seq=seq, label=f"b={value}",
               params_json=RunParams(overrides=overrides).to_json(), nodes=nodes,
               state=RunState.PASSED if outcome == "pass" else RunState.FAILED,
               outcome=outcome, tgs=tgs, mfu=None, failure_class=None, detail=None,
               not_before=None)


def spec(**fields: Any) -> ModelPerfSpec:
    parsed = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                         **fields})
    assert isinstance(parsed, ModelPerfSpec)
    return parsed


def finish(s: ModelPerfSpec, runs: Sequence[Run], nodes: Sequence[str] = FOUR,
           facts: PerfFacts | None = None) -> Finished:
    done = plan(s, SweepContext(runs=list(runs), nodes=list(nodes), gpu_memory_gib=192,
                                facts=facts or PerfFacts()))
    assert isinstance(done, Finished), done
    return done


def at_the_edge() -> Finished:
    """The best is the highest value given; 4 and 6 were not needed."""
    return finish(spec(values=[4, 6, 8, 10, 12]),
                  [run(1, 8, "pass", 1000.0), run(2, 10, "pass", 1100.0),
                   run(3, 12, "pass", 1200.0)])


def cut_by_the_budget() -> Finished:
    """extend_budget spent with 12, beside the best, unrun."""
    return finish(spec(values=[4, 6, 8, 9, 10, 12], max_runs=1, extend_budget=True),
                  [run(1, 8, "pass", 1000.0), run(2, 9, "pass", 1050.0),
                   run(3, 4, "pass", 500.0), run(4, 6, "pass", 750.0),
                   run(5, 10, "pass", 1100.0)])


def on_fewer_nodes() -> Finished:
    """An exclusion left three of the four pinned nodes; nothing else to say."""
    return finish(spec(values=[4, 8]),
                  [run(1, 4, "pass", 900.0, nodes="chi[1-3]"),
                   run(2, 8, "pass", 1000.0, nodes="chi[1-3]")], nodes=FOUR[:3])


def nothing_fits() -> Finished:
    return finish(spec(values=[4]), [run(1, 4, "oom")])


def flat_top() -> Finished:
    """Two values read within the noise of each other."""
    return finish(spec(values=[4, 8]), [run(1, 4, "pass", 1000.0), run(2, 8, "pass", 1004.0)])


def from_an_earlier_sweep() -> Finished:
    """An earlier sweep of the cell stands in for the values this one did not run (today's
    curve is its own, 1 % slower)."""
    return _after_an_earlier_sweep(lambda b: 0.99)


def earlier_curve_moved() -> Finished:
    """Today's curve peaks lower than the earlier sweep's: its runs are not used."""
    return _after_an_earlier_sweep(lambda b: 0.7 if b >= 12 else 0.99)


def _after_an_earlier_sweep(today: Callable[[int], float]) -> Finished:
    """The planner driven to its verdict on today's curve (`today`: its ratio to the
    earlier one at each batch)."""
    curve = {b: 1100.0 - 40.0 * abs(b - 12) for b in range(1, 17)}
    earlier = Prior(sweep=7, peak=12, tgs=curve[12], max_fit=16, oom=17,
                    probes=tuple(Probe(b, Outcome.OK, curve[b]) for b in (4, 8, 12, 14, 16)))
    facts = PerfFacts(prior=earlier)
    s, runs = spec(), list[Run]()
    for seq in range(1, 17):
        step = plan(s, SweepContext(runs=runs, nodes=FOUR, gpu_memory_gib=192, facts=facts))
        if not isinstance(step, list):
            break
        value = step[0].params.overrides["per_device_batch_size"]
        runs.append(run(seq, value, "pass", curve[value] * today(value)))
    return finish(s, runs, facts=facts)


def run_twice() -> Finished:
    """The one value given ran twice: the verdict rests on the mean, within their range."""
    return finish(spec(values=[8]), [run(1, 8, "pass", 1000.0), run(2, 8, "pass", 1010.0)])


def two_settings() -> Finished:
    knob = "remat_policy"
    runs = [run(i + 1, b, "pass", t, second=(knob, p)) for i, (b, p, t) in enumerate(
        ((4, "full", 900.0), (8, "full", 1000.0), (4, "minimal", 950.0),
         (8, "minimal", 1080.0)))]
    return finish(spec(values=[4, 8], second={"parameter": knob,
                                              "values": ["full", "minimal"]}), runs)


CASES: dict[str, Callable[[], Finished]] = {
    "at_the_edge": at_the_edge, "cut_by_the_budget": cut_by_the_budget,
    "on_fewer_nodes": on_fewer_nodes, "nothing_fits": nothing_fits, "flat_top": flat_top,
    "from_an_earlier_sweep": from_an_earlier_sweep, "two_settings": two_settings,
    "run_twice": run_twice, "earlier_curve_moved": earlier_curve_moved,
}
