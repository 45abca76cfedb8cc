"""Runs that are not comparable: a node slowed mid-sweep (the spec's check_slowdown). A
value run again reading lower beyond the noise of two runs' difference ends the search
without a verdict; the best runs again where a later run could hide a faster value behind
a slowdown."""

from __future__ import annotations

from dataclasses import replace

from sweepd.kinds.model_perf.search import Outcome, Probe, batch_space, next_probe, slowdown
from sweepd.kinds.model_perf.search.slowed import SLOW_MAX, check_run, slow_bar

CHECKED = replace(batch_space(40), check_slowdown=True)


def _runs(*runs: tuple[int, float]) -> list[Probe]:
    return [Probe(v, Outcome.OK, t) for v, t in runs]


def test_a_value_run_again_lower_beyond_the_bar_is_a_slowdown_named_by_its_runs() -> None:
    assert 0.028 < slow_bar(CHECKED) < 0.029  # FLAT x sqrt(2) at the default 1 % noise
    runs = _runs((20, 1100.0), (24, 1000.0), (22, 1020.0), (20, 1060.0))
    found = slowdown(CHECKED, runs)
    assert found is not None and (found.value, found.first, found.again) == (20, 0, 3)
    assert -0.037 < found.drop < -0.036
    assert next_probe(CHECKED, runs, runs_left=5, thorough=True) is None


def test_a_drop_within_the_bar_a_rise_or_the_check_off_is_no_slowdown() -> None:
    within = _runs((20, 1100.0), (24, 1000.0), (20, 1075.0))   # -2.3 %
    rise = _runs((20, 1100.0), (24, 1000.0), (20, 1150.0))
    assert slowdown(CHECKED, within) is None and slowdown(CHECKED, rise) is None
    dropped = _runs((20, 1100.0), (24, 1000.0), (20, 1000.0))
    assert slowdown(batch_space(40), dropped) is None   # off by default
    assert slowdown(replace(CHECKED, noise=0.04), dropped) is None   # -9 % within 11.3 %


def test_the_settled_best_runs_again_when_a_later_run_reads_close_to_it() -> None:
    runs = _runs((16, 1000.0), (20, 1100.0), (24, 1050.0), (22, 1080.0))
    step = check_run(CHECKED, runs)
    assert step is not None and step.value == 20 and step.repeat
    assert step.rule == "slowdown_check" and "24, 22" in step.why
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
    assert step is not None and step.value == 20 and step.rule == "slowdown_check"
    assert next_probe(CHECKED, runs, runs_left=0, thorough=True) is None
    same = [*runs, Probe(20, Outcome.OK, 1290.0)]
    assert next_probe(CHECKED, same, runs_left=3, thorough=True) is None
