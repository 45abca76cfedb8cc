"""Runs that are not comparable: a node slowed mid-sweep (`search.slowed`). A value run
again reading lower beyond the noise of two runs' difference, confirmed by one more run,
ends the search without a verdict; with the spec's check_slowdown the best runs again
where a later run could hide a faster value behind a slowdown."""

from __future__ import annotations

from dataclasses import replace

from sweepd.core.states import RunState
from sweepd.kinds.api import Plan, Stop, SweepContext
from sweepd.kinds.model_perf.comparable import SLOWED_STOP
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.plan import plan
from sweepd.kinds.model_perf.rules import REPEAT, SLOWDOWN_CHECK, SLOWDOWN_CONFIRM
from sweepd.kinds.model_perf.search import Outcome, Probe, batch_space, next_probe, slowdown
from sweepd.kinds.model_perf.search.slowed import SLOW_MAX, check_run, pending, slow_bar
from sweepd.kinds.model_perf.search.suspect import suspect
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import Run, RunParams
from tests.golden_files import GOLDEN, check_golden_cases

CHECKED = replace(batch_space(40), check_slowdown=True)


def _runs(*runs: tuple[int, float]) -> list[Probe]:
    return [Probe(v, Outcome.OK, t) for v, t in runs]


def test_a_drop_beyond_the_bar_runs_an_earlier_value_again_which_confirms_it() -> None:
    assert 0.028 < slow_bar(CHECKED) < 0.029  # FLAT x sqrt(2) at the default 1 % noise
    runs = _runs((16, 1000.0), (20, 1100.0), (24, 1000.0), (22, 1020.0), (20, 1060.0))
    assert slowdown(CHECKED, runs) is None   # one drop (-3.6 %) is not enough
    step = next_probe(CHECKED, runs, runs_left=5, thorough=True)
    # 16 ran before 20's first run: its two runs span the whole drop.
    assert step is not None and step.value == 16 and step.rule == SLOWDOWN_CONFIRM.id
    confirmed = [*runs, Probe(16, Outcome.OK, 960.0)]   # -4 %: beyond two runs' noise
    found = slowdown(CHECKED, confirmed)
    assert found is not None and found.shown.value == 20 and found.confirmed.value == 16
    # The readings fell after 20's first run (probe 1) and by its second (probe 4).
    assert (found.since, found.until) == (2, 4) and -0.037 < found.shown.drop < -0.036
    assert next_probe(CHECKED, confirmed, runs_left=4, thorough=True) is None
    # 16 read as before: the drop was the noise, and the search goes on as it would.
    answered = [*runs, Probe(16, Outcome.OK, 995.0)]
    assert slowdown(CHECKED, answered) is None and pending(CHECKED, answered) is None
    going = next_probe(CHECKED, answered, runs_left=4, thorough=True)
    assert going is None or going.rule != SLOWDOWN_CONFIRM.id


def test_with_no_earlier_value_the_value_itself_runs_a_third_time() -> None:
    runs = _runs((20, 1100.0), (24, 1000.0), (20, 1060.0))
    step = next_probe(CHECKED, runs, runs_left=3, thorough=True)
    assert step is not None and step.value == 20 and step.rule == SLOWDOWN_CONFIRM.id
    found = slowdown(CHECKED, [*runs, Probe(20, Outcome.OK, 1050.0)])
    assert found is not None and (found.since, found.until) == (1, 2)
    assert slowdown(CHECKED, [*runs, Probe(20, Outcome.OK, 1090.0)]) is None


def test_a_drop_within_the_bar_a_rise_or_the_check_off_is_no_slowdown() -> None:
    within = _runs((20, 1100.0), (24, 1000.0), (20, 1075.0))   # -2.3 %
    rise = _runs((20, 1100.0), (24, 1000.0), (20, 1150.0))
    for runs in (within, rise):
        assert pending(CHECKED, runs) is None
        step = next_probe(CHECKED, runs, runs_left=3, thorough=True)
        assert step is None or step.rule not in (SLOWDOWN_CHECK.id, SLOWDOWN_CONFIRM.id)
    dropped = _runs((20, 1100.0), (24, 1000.0), (20, 1000.0), (20, 1000.0))
    assert slowdown(batch_space(40), dropped) is None   # off at the default noise
    assert slowdown(replace(CHECKED, slowdown_seen=True), dropped) is None   # resumed past it
    assert slowdown(CHECKED, dropped) is not None
    # Above NOISE the runs made again anyway are read for it, at that noise's bar.
    assert slowdown(replace(batch_space(40), noise=0.02), dropped) is not None
    assert slowdown(replace(batch_space(40), noise=0.04), dropped) is None   # within 11.3 %


def test_the_settled_best_runs_again_when_a_later_run_reads_close_to_it() -> None:
    runs = _runs((16, 1000.0), (20, 1100.0), (24, 1050.0), (22, 1080.0))
    step = check_run(CHECKED, runs)
    assert step is not None and step.value == 20 and step.repeat
    assert step.rule == SLOWDOWN_CHECK.id and "24, 22" in step.why
    assert check_run(batch_space(40), runs) is None   # off by default
    # Run twice already: its runs are what the check compares.
    assert check_run(CHECKED, [*runs, Probe(20, Outcome.OK, 1095.0)]) is None


def test_no_check_run_where_no_later_run_could_hide_a_faster_value() -> None:
    last = _runs((16, 1000.0), (24, 1050.0), (20, 1100.0))   # the best ran last
    assert check_run(CHECKED, last) is None
    far = (1 - SLOW_MAX) * 1100.0 - 1
    assert check_run(CHECKED, _runs((20, 1100.0), (40, far))) is None


def test_the_search_makes_the_check_run_once_it_has_settled() -> None:
    # A curve the search settles on (the bench's interior peak at 20): the check is the
    # last step, made only with runs left.
    runs = _runs((4, 500.0), (30, 1180.0), (20, 1300.0), (25, 1250.0), (17, 1260.0),
                 (22, 1290.0), (19, 1285.0), (21, 1295.0))
    assert next_probe(batch_space(40), runs, runs_left=4, thorough=True) is None
    step = next_probe(CHECKED, runs, runs_left=4, thorough=True)
    assert step is not None and step.value == 20 and step.rule == SLOWDOWN_CHECK.id
    assert next_probe(CHECKED, runs, runs_left=0, thorough=True) is None
    same = [*runs, Probe(20, Outcome.OK, 1290.0)]
    assert next_probe(CHECKED, same, runs_left=3, thorough=True) is None


def _run(seq: int, batch: int, tgs: float) -> Run:
    return Run(id=seq, sweep_id=1, seq=seq, label=f"b={batch}",
               params_json=RunParams(overrides={"per_device_batch_size": batch}).to_json(),
               nodes="chi[1-4]", state=RunState.PASSED, outcome="pass", tgs=tgs, mfu=None,
               failure_class=None, detail=None, not_before=None)


def _plan(runs: list[Run], acknowledged: tuple[str, ...] = ()) -> Plan:
    spec = parse_spec({"kind": "model-perf", "model": "llama2-70b", "nodes": "chi[1-4]",
                       "values": [8, 12, 16], "check_slowdown": True})
    assert isinstance(spec, ModelPerfSpec)
    return plan(spec, SweepContext(runs=runs, nodes=["chi1", "chi2", "chi3", "chi4"],
                                   gpu_memory_gib=192, facts=PerfFacts(),
                                   acknowledged_stops=acknowledged))


def test_the_plan_confirms_a_drop_then_asks_naming_the_runs_then_goes_on_if_resumed() -> None:
    runs = [_run(1, 12, 1200.0), _run(2, 8, 1000.0),
            _run(3, 16, 1100.0), _run(4, 12, 1150.0)]
    confirm = _plan(runs)
    # 12 ran first: nothing ran before it to span the drop, so 12 runs a third time.
    assert isinstance(confirm, list) and confirm[0].rule == "model_perf.slowdown_confirm"
    assert confirm[0].params.overrides == {"per_device_batch_size": 12}
    slowed = [*runs, _run(5, 8, 950.0)]   # 8 read 5 % lower too
    stop = _plan(slowed)
    assert isinstance(stop, Stop) and stop.rule == SLOWED_STOP
    # 8's runs (2, 5) and 12's (1, 4) both span runs 3-4: the readings fell at one of
    # them; no optimum is claimed, and the evidence names the runs.
    check_golden_cases(GOLDEN / "model_perf_slowdown" / "confirm_then_ask.txt", {
        "confirm (12 read -4.2%)": confirm[0].reason, "stop": stop.reason,
        "stop evidence": str(stop.evidence)})
    resumed = _plan(slowed, (SLOWED_STOP,))
    assert isinstance(resumed, list) and resumed[0].rule == REPEAT.id   # 16 runs again: the noise


# Red team s14 at the default noise (~1 %): the node slowed from run 7 (22) on. 22, run
# after 20 and 24, read 2.7 % under their chord: a concave curve does not do that.
S14 = _runs((4, 500.0), (34, 1041.0), (30, 1195.0), (16, 1147.0), (24, 1372.0),
            (20, 1316.0), (22, 1308.0))
DEFAULT = batch_space(34)


def test_by_default_a_later_run_below_its_neighbours_chord_runs_the_best_again() -> None:
    found = suspect(DEFAULT, S14)
    assert found is not None and found.startswith("22, run after its neighbours") \
        and "20 and 24" in found
    step = next_probe(DEFAULT, S14, runs_left=5, thorough=True)
    # At once, not when the search settles: the budget the valley would take stays.
    assert step is not None and step.value == 24 and step.rule == SLOWDOWN_CHECK.id
    assert step.repeat and "the runs point at it: 22" in step.why
    # 24 read 8 % lower: the drop is read at the default noise too, and confirmed by 16
    # (run before 24's first run) reading lower, the search stops to ask.
    dropped = [*S14, Probe(24, Outcome.OK, 1263.0)]
    confirm = next_probe(DEFAULT, dropped, runs_left=4, thorough=True)
    assert confirm is not None and confirm.value == 16 and confirm.rule == SLOWDOWN_CONFIRM.id
    slowed = [*dropped, Probe(16, Outcome.OK, 1085.0)]
    assert slowdown(DEFAULT, slowed) is not None
    assert next_probe(DEFAULT, slowed, runs_left=3, thorough=True) is None
    # 24 read as before: the dip was the curve's; the search goes on, and checks no more.
    same = [*S14, Probe(24, Outcome.OK, 1368.0)]
    going = next_probe(DEFAULT, same, runs_left=4, thorough=True)
    assert going is None or going.rule not in (SLOWDOWN_CHECK.id, SLOWDOWN_CONFIRM.id)


def test_no_check_where_the_runs_do_not_point_at_a_slowdown() -> None:
    # 22 ran before both its neighbours: a slowdown after it lowers the chord, not 22.
    before = _runs((4, 500.0), (16, 1147.0), (22, 1250.0), (20, 1316.0), (24, 1372.0))
    assert suspect(DEFAULT, before) is None
    # 22 ran after 20 but before the best (24): 24 run again could not show it.
    early = _runs((4, 500.0), (16, 1147.0), (20, 1316.0), (22, 1250.0), (24, 1400.0))
    assert suspect(DEFAULT, early) is None
    # On or above the chord (within two runs' noise): a concave curve's reading.
    concave = _runs((4, 500.0), (34, 1041.0), (30, 1195.0), (16, 1147.0), (24, 1372.0),
                    (20, 1316.0), (22, 1330.0))
    assert suspect(DEFAULT, concave) is None
    step = next_probe(DEFAULT, concave, runs_left=5, thorough=True)
    assert step is None or step.rule != SLOWDOWN_CHECK.id
    # Above NOISE the best and its rivals run again anyway: no run more for it.
    noisy = replace(DEFAULT, noise=0.012)
    assert check_run(noisy, S14, settled=False) is None
    # Resumed past a stop for it: the runs are read as one curve.
    assert check_run(replace(DEFAULT, slowdown_seen=True), S14, settled=False) is None
