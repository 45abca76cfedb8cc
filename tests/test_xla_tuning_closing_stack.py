"""The closing wave: a stack predicted to reach the win bar is run before the re-runs of a
leader that reads under it (at 880 s jobs two +3 % singles, hpas and protoS, whose stack
gives +7 %, were read by run 22 of 33; the rest went to the +3 % leader's confirmation,
baseline re-runs and Wave 6, and the stack ran in 3 of 40 sweeps)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.evidence.results import Result
from tests.support.xla import (
    FILLER,
    FLAT,
    planned_names,
)
from tests.support.xla_verdicts import _base, _ok

MORE = ("ag256M", "ag384M", "ag2G", "ag4G", "rs256M", "rs384M", "rs2G", "rs4G", "agrs256M",
        "agrs384M", "agrs512M", "agrs1G", "agrs2G", "agrs4G", "ovl2")  # 15 more: 41 runs


def _closing_wave(proto_s: float, job_s: float = 880.0,
                  more: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    results: list[Result] = [
        *_base(2, job_s),
        *[_ok(p, tgs, 3, queue_s=job_s) for p, tgs in FLAT],
        *[_ok(p, 1000.0, 3, queue_s=job_s) for p in FILLER + more],
        _ok("hpas", 1031.0, 4, queue_s=job_s), _ok("hpas", 1029.0, 4, queue_s=job_s),
        _ok("protoS", proto_s, 4, queue_s=job_s)]
    return planned_names(results)


def test_a_stack_predicted_over_the_bar_runs_before_a_leader_under_it() -> None:
    wave = _closing_wave(1030.0)  # hpas +3 % (n=2), protoS +3 %: "+6.09 % if they add up"
    assert wave[0] == ("hpas+protoS", "wave.closing_stack")
    assert ("hpas", "noise.confirm") in wave  # the leader's needs still follow


def test_a_stack_predicted_under_the_bar_waits() -> None:
    wave = _closing_wave(1019.0)  # protoS +1.9 %: the stack would read +4.96 % at best
    assert all(rule != "wave.closing_stack" for _, rule in wave)
    assert ("hpas", "noise.confirm") in wave


def test_ten_minute_jobs_keep_the_closing_wave_for_the_leader() -> None:
    # 48 runs in the 8 h: the stack mostly runs before the closing wave, and one whose
    # parts cancel (+3 %, +3 %, stack 0 %) cost more sweeps there than the rule won.
    wave = _closing_wave(1030.0, job_s=600.0, more=MORE)
    assert all(rule != "wave.closing_stack" for _, rule in wave)
    assert ("hpas", "noise.confirm") in wave
