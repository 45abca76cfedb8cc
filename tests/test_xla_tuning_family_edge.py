"""The closing wave: a numeric family rising toward an unrun value at the edge of the values
run has that value tried before the re-runs of a leader that cannot be confirmed at +5 %
(at 880 s jobs rs1G, rs768M, rs512M read -1.1, +1.5, +3.3 % and the last wave re-ran
rs512M; rs256M, +6.8 %, never ran)."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.evidence.results import Result
from tests.support.xla import (
    FLAT,
    planned_names,
)
from tests.support.xla_verdicts import _base, _ok

JOB_S = 880.0
FILLER = ("nbuf", "nch8", "qps8", "protoS", "hpas", "ovl4", "lhs", "ag768M", "mem95",
          "ag512M", "ag1G", "nch8+rs768M", "ovl4+rs768M")


def _closing_wave(rs512m: float) -> list[tuple[str, str]]:
    results: list[Result] = [
        *_base(2, JOB_S),
        *[_ok(p, tgs, 3, queue_s=JOB_S) for p, tgs in FLAT if p != "rs768M"],
        *[_ok(p, 1000.0, 3, queue_s=JOB_S) for p in FILLER],
        _ok("rs1G", 989.0, 4, queue_s=JOB_S), _ok("rs768M", 1015.0, 3, queue_s=JOB_S),
        _ok("rs512M", rs512m, 4, queue_s=JOB_S)]
    return planned_names(results)




def test_a_rising_edge_is_run_before_rerunning_a_leader_under_the_bar() -> None:
    wave = _closing_wave(1033.0)  # rs512M +3.3 % on one run: its re-runs cannot confirm +5 %
    assert wave[0] == ("rs384M", "wave.numeric_edge")
    assert ("rs512M", "noise.confirm") in wave  # its confirmation still follows


def test_a_leader_over_the_bar_is_confirmed_first() -> None:
    wave = _closing_wave(1058.0)  # rs512M +5.8 %: the re-runs may confirm it
    assert all(rule != "wave.numeric_edge" for _, rule in wave)
    assert ("rs512M", "noise.confirm") in wave
