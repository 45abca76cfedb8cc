"""Issue 22's rules, one at a time: a hang after a compiled-memory line that fits, a
failure without an allocation size, the budget beside the best, a failure that contradicts
a pass."""

from __future__ import annotations

from dataclasses import replace

from sweepd.config import PolicyConfig
from sweepd.core.policy import Act, Case, SweepFacts, decide
from sweepd.core.states import JobState, RunState
from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.model_perf.probes import _how_it_stands, probes
from sweepd.kinds.model_perf.rules import BISECT, CONTRADICTION_RERUN
from sweepd.kinds.model_perf.search import (
    Outcome,
    Probe,
    batch_space,
    best,
    memory_fit,
    next_probe,
)
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.monitor.classify import JobFacts, classify
from sweepd.monitor.facts import FailureClass, Phase
from sweepd.store.rows import Job, Run, RunParams
from tests.golden_files import GOLDEN, check_golden, check_golden_cases
from tests.model_perf_curves import passed_run

FOUR = ["chi1", "chi2", "chi3", "chi4"]


def _hung(compiled: tuple[float, float] | None) -> JobFacts:
    return JobFacts(phase=Phase.COMPILE, hung=True, compiled_gb=compiled,
                    node_map={0: "chi1", 1: "chi2"})


def test_a_hang_after_a_compiled_memory_line_that_fits_is_not_a_compile_oom() -> None:
    slow = classify(_hung((174.8, 178.6)))
    assert slow.klass is FailureClass.HANG
    assert slow.detail is not None and "(174.8 of 178.6 GB)" in slow.detail
    check_golden(GOLDEN / "batch_search" / "hang_after_a_fitting_compile_line.txt",
                 slow.detail + "\n")
    # Before the line, or after one that does not fit: the seed's silent OOM.
    assert classify(_hung(None)).klass is FailureClass.OOM
    assert classify(_hung((180.1, 178.6))).klass is FailureClass.OOM


def test_a_too_slow_hang_is_retried_once_and_explain_says_why() -> None:
    verdict = classify(_hung((174.8, 178.6)))
    facts = SweepFacts(FOUR, (), 2)
    first = decide(Case(verdict, (), facts, PolicyConfig()))
    assert first.act is Act.RETRY and first.rule == "hang.retry_once"
    assert "not a silent compile OOM" in first.reason
    again = decide(Case(verdict, (verdict,), facts, PolicyConfig()))
    assert again.act is Act.RECORD and again.outcome == "hang"
    assert "again after one retry" in again.reason


def _line(value: int, temp: float, outcome: Outcome = Outcome.OK,
          tgs: float | None = None, alloc: float | None = None) -> Probe:
    """A run whose log printed compiled memory: 4 GB fixed, a 178.6 GB pool."""
    return Probe(value, outcome, tgs, temp_gb=temp, fixed_gb=4.0, limit_gb=178.6,
                 alloc_gb=alloc)


def test_too_slow_bounds_from_above_bisects_and_teaches_memory_nothing() -> None:
    """The issue's sequence: 4 passed, 30 hung twice after fitting (174.8 of 178.6 GB).
    Before: the pool was lowered by '30's OOM' and 29 ran next, then 28, 27, ..."""
    probes_ = [_line(4, 31.0, tgs=1000.0), _line(30, 170.8, Outcome.SLOW)]
    fit = memory_fit(probes_)
    assert fit is not None and "lowered" not in fit.why and fit.limit == 178.6
    step = next_probe(batch_space(40), probes_)
    # The midpoint (17), moved to the aligned 16 (a midpoint is a loose target).
    assert step is not None and step.value == 16, step
    assert step.rule == BISECT.id
    # 30 and above are never run: the bound holds.
    more = [*probes_, _line(16, 100.0, Outcome.SLOW)]
    step = next_probe(batch_space(40), more)
    assert step is not None and 4 < int(step.value) < 16 and int(step.value) != 15


def test_a_failure_without_an_allocation_size_is_bisected_toward_not_walked() -> None:
    silent = [_line(4, 31.0, tgs=1000.0), _line(30, 170.8, Outcome.OOM)]
    step = next_probe(batch_space(40), silent)
    assert step is not None and step.value == 16 and "without an allocation size" in step.why
    # With its allocation size, the memory line decides (the largest predicted fit).
    sized = [_line(4, 31.0, tgs=1000.0), _line(30, 178.0, Outcome.OOM, alloc=4.0)]
    step = next_probe(batch_space(40), sized)
    assert step is not None and int(step.value) >= 25
    # No pass yet: half the failure, not three quarters of it.
    step = next_probe(batch_space(40), [Probe(24, Outcome.FAILED, None)])
    assert step is not None and step.value == 12


def test_the_last_runs_close_the_gap_beside_the_best() -> None:
    """Rising to 12, a pass at 20 lower, a bottom gap untried: with one run left the run
    goes beside the best, not to the bottom."""
    seen = [Probe(12, Outcome.OK, 1000.0), Probe(20, Outcome.OK, 900.0),
            Probe(24, Outcome.OOM, None, alloc_gb=3.0)]
    free = next_probe(batch_space(16), seen)
    last = next_probe(batch_space(16), seen, runs_left=1)
    assert free is not None and last is not None
    assert 12 < int(last.value) < 20
    check_golden(GOLDEN / "batch_search" / "last_run_beside_the_best.txt", last.why + "\n")


def _run(seq: int, batch: int, outcome: str, tgs: float | None = None,
         failure: str | None = None, nodes: str = "chi[1-4]") -> Run:
    return Run(id=seq, sweep_id=1, seq=seq, label=f"b={batch}",
               params_json=RunParams(overrides={"per_device_batch_size": batch}).to_json(),
               nodes=nodes, state=RunState.PASSED if outcome == "pass" else RunState.FAILED,
               outcome=outcome, tgs=tgs, mfu=None, failure_class=failure, detail=None,
               not_before=None)


def _job(run: Run, detail: str | None) -> Job:
    return Job(id=run.id, run_id=run.id, sweep_id=1, attempt=1, token="t", job_name="j",
               nodes=run.nodes, backend_id="1", log_path=None, state=JobState.FAILED,
               scheduler_state=None, submitted_at=None, ended_at=None, log_offset=0,
               log_identity=None, last_output_at=None, phase="compile", last_step=None,
               profiler=0, mem_used_gb=None, mem_limit_gb=None, summary_status=None,
               summary_exit=None, node_map_json=None, tgs=None, mfu=None,
               failure_class=run.failure_class, failure_node=None, failure_line=None,
               failure_detail=detail, submit_deadline=None)


def _spec() -> ModelPerfSpec:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "upper": 24})
    assert isinstance(spec, ModelPerfSpec)
    return spec


def test_a_silent_failure_below_a_pass_is_rerun_once_on_the_same_nodes() -> None:
    runs = [_run(1, 16, "pass", 1000.0), _run(2, 12, "oom", failure="oom")]
    ctx = SweepContext(runs=runs, nodes=FOUR, gpu_memory_gib=192, facts=PerfFacts(),
                       jobs=[_job(runs[1], None)])
    new = plan(_spec(), ctx)
    assert isinstance(new, list) and new[0].params.overrides == {"per_device_batch_size": 12}
    assert new[0].rule == CONTRADICTION_RERUN.id
    check_golden(GOLDEN / "batch_search" / "contradiction_rerun.txt", new[0].reason + "\n")
    assert list(new[0].nodes) == FOUR
    # Failing again it stands, bounds nothing below 16, and is never run a third time.
    twice = [*runs, _run(3, 12, "oom", failure="oom")]
    ctx = SweepContext(runs=twice, nodes=FOUR, gpu_memory_gib=192, facts=PerfFacts(),
                       jobs=[_job(twice[1], None), _job(twice[2], None)])
    after = plan(_spec(), ctx)
    assert isinstance(after, list) and after[0].rule != CONTRADICTION_RERUN.id
    assert after[0].params.overrides["per_device_batch_size"] != 12


def test_an_oom_with_its_allocation_below_a_pass_stands_and_bounds_nothing_below() -> None:
    runs = [_run(1, 16, "pass", 1000.0), _run(2, 12, "oom", failure="oom")]
    ctx = SweepContext(runs=runs, nodes=FOUR, gpu_memory_gib=192, facts=PerfFacts(),
                       jobs=[_job(runs[1], "2.50GiB")])
    assert [(p.value, p.outcome) for p in probes(_spec(), ctx)] == \
        [(16, Outcome.OK), (12, Outcome.OOM)]
    seen = []
    for _ in range(6):
        new = plan(_spec(), ctx)
        if not isinstance(new, list):
            break
        b = int(new[0].params.overrides["per_device_batch_size"])
        assert b != 12   # never retried at the same batch
        seen.append(b)
        runs = [*runs, _run(len(runs) + 1, b, "pass", 1000.0 - abs(b - 14) * 10)]
        ctx = SweepContext(runs=runs, nodes=FOUR, gpu_memory_gib=192, facts=PerfFacts(),
                           jobs=[_job(runs[1], "2.50GiB")])
    # Values below 12 and between 12 and 16 were searched: the OOM capped nothing there.
    assert any(b < 12 for b in seen) and any(12 < b < 16 for b in seen), seen


def _floor_sweep(failure: Outcome) -> list[Probe]:
    """Peak at 3, a floor at 50 from 6 up, `failure` from 17 up; the search starts at 11."""
    def run(b: int) -> Probe:
        if b >= 17:
            return _line(b, 6.0 * b, failure, alloc=3.0 if failure is Outcome.OOM else None)
        return _line(b, 6.0 * b, tgs=50.0 + 0.01 * b if b >= 6 else 100.0 - 10 * abs(b - 3))
    seen = [run(22), run(11)]
    while (step := next_probe(batch_space(29), seen)) is not None and len(seen) < 12:
        seen.append(run(int(step.value)))
    return seen


def test_a_flat_floor_under_a_too_slow_value_does_not_settle_the_bottom() -> None:
    """Past a steep fall TGS sits on a floor; two passes there measure it flat. Under a
    value too slow to finish its first step that flat secant bounds nothing below: the
    peak may be there (before: the search stopped on the floor)."""
    top = best(_floor_sweep(Outcome.SLOW))
    assert top is not None and top.value == 3


def test_runs_flat_over_twice_their_range_do_not_settle_what_lies_below() -> None:
    """Peak at 1, then a fall to a floor from 4 up: every run lands on the floor and
    measures the same. A concave curve is flat over [4, 10] only on a plateau at its top;
    the floor of a fall looks the same, so the gap below the lowest run is tried (before:
    "optimum 16" at 5 % of the peak's TGS, settled)."""
    def run(b: int) -> Probe:
        return _line(b, 6.0 * b, tgs=1300.0 if b == 1 else 700.0 if b == 2 else 66.0)
    seen = [run(4), run(16), run(10)]
    while (step := next_probe(batch_space(29), seen)) is not None and len(seen) < 12:
        seen.append(run(int(step.value)))
    top = best(seen)
    assert top is not None and top.value == 1, [p.value for p in seen]


def test_a_secant_through_two_runs_one_batch_apart_settles_nothing_far_below() -> None:
    """Red-team case: 399 and 400 (the memory's top) read 1220 and 1234 by noise while the
    peak sat at 300. Their secant, extended down to 5, put every batch below at most
    -2.2 % under the best, and the sweep stopped on 400 (13 % slow). Widened by the noise
    on its two runs past their own span, the line bounds nothing that far away."""
    space = batch_space(400, upper=400)
    ran = [Probe(4, Outcome.OK, 400.0), Probe(399, Outcome.OK, 1220.0),
           Probe(400, Outcome.OK, 1234.0), Probe(401, Outcome.OOM, None, alloc_gb=2.0)]
    step = next_probe(space, ran)
    assert step is not None and 4 < int(step.value) < 399, step


def test_a_steep_secant_still_settles_the_gap_below_it() -> None:
    """The widening is the noise's, not a blanket doubt: a fall of 10 % a batch measured
    on runs 2 apart still rules out the batches far above them."""
    space = batch_space(30, upper=30)
    ran = [Probe(b, Outcome.OK, 1000.0 - 100 * abs(b - 10)) for b in (6, 8, 10, 12, 14)]
    assert next_probe(space, ran) is None


def test_a_flat_top_names_runs_within_the_noise_that_are_not_beside_the_best() -> None:
    from sweepd.kinds.model_perf.search import flat_top
    space = batch_space(400, upper=400)
    ran = [Probe(b, Outcome.OK, t) for b, t in
           ((200, 1200.0), (296, 1379.0), (308, 1380.0), (320, 1384.0), (340, 1300.0))]
    note = flat_top(space, ran)
    # Three may be the faster: "any of these 3", not "either".
    check_golden(GOLDEN / "batch_search" / "flat_top_three.txt", f"{note}\n")


def test_a_failure_below_a_pass_is_said_in_its_own_class_words() -> None:
    """A value that hung twice after its compiled-memory line said it fits was called an OOM
    in the verdict (red team v02, v09): each failure that stands says what it was."""
    def failed(outcome: str) -> Run:
        return replace(passed_run(1, 19, 0.0), outcome=outcome, tgs=None)

    assert "OOM" not in _how_it_stands(failed("hang"), None)
    check_golden_cases(GOLDEN / "batch_search" / "failure_below_a_pass.txt", {
        k: _how_it_stands(failed(k), None) for k in ("hang", "oom")})
