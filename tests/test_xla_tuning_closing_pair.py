"""Issue 43, item 2b: before the 8 h stop spends its last runs confirming a leader under the
win bar, the stack of the two best singles runs when it is predicted above the leader (with
`Inputs.closing_pair`; off by default). A +3 % single and a +1.5 % helper (+4.55 % if they
add up) never reached `wave.closing_stack`, whose stacks must be predicted at +5 %."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.evidence.drift import DriftRead
from sweepd.kinds.xla_tuning.evidence.results import Result
from sweepd.kinds.xla_tuning.search import Planned, Verdict, plan
from tests.support.xla import FILLER, FLAT
from tests.support.xla_verdicts import EV, _base, _inputs, _ok

JOB_S = 880.0  # 33 runs in the 8 h: few runs


def _closing_wave(proto_s: float, on: bool = True, extra: tuple[Result, ...] = ()
                  ) -> list[tuple[str, str]]:
    results: list[Result] = [
        *_base(2, JOB_S),
        *[_ok(p, tgs, 3, queue_s=JOB_S) for p, tgs in FLAT],
        *[_ok(p, 1000.0, 3, queue_s=JOB_S) for p in FILLER],
        _ok("hpas", 1031.0, 4, queue_s=JOB_S), _ok("hpas", 1029.0, 4, queue_s=JOB_S),
        _ok("protoS", proto_s, 4, queue_s=JOB_S), *extra]
    out = plan(_inputs(fsdp8(), drift=DriftRead.MEAN, closing_pair=on), results, EV)
    assert not isinstance(out, Verdict) and out, out
    return [(p.profile.name, p.rule) for p in out if isinstance(p, Planned)]


def test_the_two_best_singles_stack_runs_before_a_sub_bar_leader_is_confirmed() -> None:
    wave = _closing_wave(1015.0)  # hpas +3 % (n=2), protoS +1.5 %: +4.55 % predicted
    assert wave[0] == ("hpas+protoS", "wave.closing_pair"), wave
    assert ("hpas", "noise.confirm") in wave  # the leader's needs still follow


def test_off_by_default_the_leader_is_confirmed_as_before() -> None:
    wave = _closing_wave(1015.0, on=False)
    assert all(rule != "wave.closing_pair" for _, rule in wave), wave
    assert wave[0][0] != "hpas+protoS"


def test_once_the_pair_ran_it_is_not_asked_again() -> None:
    ran = (_ok("hpas+protoS", 1040.0, 5, queue_s=JOB_S),)
    wave = _closing_wave(1015.0, extra=ran)
    assert all(rule != "wave.closing_pair" for _, rule in wave), wave


def test_a_pair_predicted_under_the_leader_waits() -> None:
    # protoS reads under the noise: nothing to stack with the leader.
    wave = _closing_wave(1004.0)
    assert all(rule != "wave.closing_pair" for _, rule in wave), wave
