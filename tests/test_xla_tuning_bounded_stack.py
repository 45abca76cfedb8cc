"""Before "structurally bounded": the stack the singles read so far add up to over the +2 %
bar runs first (three +1.5 % singles at 0.8 % noise, any pair +3.0 %, each read under its
standard error once, were never stacked and the cell was called bounded in 12 of 40 sweeps
at 880 s), and a bounded verdict never stands while a stack reads significantly above it."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Result
from sweepd.kinds.xla_tuning.search import Plan, Planned, Verdict, plan
from sweepd.kinds.xla_tuning.waves.planned import VerdictKind
from tests.support.xla import FLAT
from tests.support.xla_verdicts import EV, H8, _base, _inputs, _ok

FILLER = ("nbuf", "nch8", "protoS", "ovl4", "lhs", "ag768M", "mem95", "rs512M", "ag512M",
          "ag1G", "rs1G", "ag256M", "ag384M", "ag2G", "ag4G", "rs256M", "rs2G", "rs4G",
          "agrs256M", "agrs384M", "agrs512M", "agrs1G", "agrs2G", "agrs4G", "ovl2", "ovl8",
          "rs384M")


def _history(*extra: Result) -> list[Result]:
    # rs768M +1.6 % twice (the leader), hpas +0.6 % once (under its standard error, so
    # `SearchSteps.stacks` leaves it out), qps8 +0.3 %, everything else flat: the planner's
    # own prediction for hpas+rs768M is +2.2 %, over the bar.
    return [*_base(3), *[_ok(p, tgs, 2) for p, tgs in FLAT if p != "rs768M"],
            *[_ok(p, 1000.0, 3) for p in FILLER],
            _ok("rs768M", 1016.0, 2), _ok("rs768M", 1016.0, 3),
            _ok("hpas", 1006.0, 3), _ok("qps8", 1003.0, 3), *extra]


def _plan(results: list[Result]) -> Plan:
    return plan(_inputs(fsdp8(), drift=DriftRead.MEAN), results, EV)


def _names(out: Plan) -> list[tuple[str, str]]:
    assert not isinstance(out, Verdict) and out, out
    return [(p.profile.name, p.rule) for p in out if isinstance(p, Planned)]


def test_a_stack_predicted_over_the_bar_runs_before_a_bounded_verdict() -> None:
    assert _names(_plan(_history())) == [("hpas+rs768M", "bounded.stack")]


def test_a_stack_read_under_the_bar_leaves_the_bounded_verdict_its_way() -> None:
    out = _plan(_history(_ok("hpas+rs768M", 1005.0, 4)))  # +0.5 %: no other stack over it
    assert isinstance(out, Verdict) or all(rule != "bounded.stack" for _, rule in _names(out))
    out = _plan(_history(_ok("hpas+rs768M", 1005.0, 4), _ok("lhs", 1000.0, 5, queue_s=H8)))
    assert isinstance(out, Verdict) and out.kind is VerdictKind.BOUNDED, out


def test_the_8h_stop_before_the_stack_ran_is_no_change_not_bounded() -> None:
    out = _plan(_history(_ok("lhs", 1000.0, 5, queue_s=H8)))
    assert isinstance(out, Verdict) and out.kind is VerdictKind.TIMEBOX, out


def test_a_stack_reading_significantly_above_the_bar_is_no_bound() -> None:
    # Its two runs read +4 %: chosen by its parts' readings, not its own.
    out = _plan(_history(_ok("hpas+rs768M", 1040.0, 4), _ok("hpas+rs768M", 1040.0, 5),
                         _ok("lhs", 1000.0, 5, queue_s=H8)))
    assert isinstance(out, Verdict) and out.kind is not VerdictKind.BOUNDED, out
